import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  base64Length,
  decodeBase64Bytes,
  isStandardBase64,
  takeCheckedBase64,
  writeBase64,
} from '../../protocol/base64.ts';

/** The check as it was, a regular expression alone: the answer the fast path must keep. */
const expression = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Short strings over characters that make base64 checks go wrong: padding, base64url's `-` and
 * `_`, white space, and characters above 255 whose low byte is a base64 character (`Ł` is
 * U+0141, `ī` U+012B: a decoder reading low bytes takes them for `A` and `+`).
 */
function strings(count: number): string[] {
  const alphabet = [
    'A',
    'Q',
    'g',
    'w',
    '+',
    '/',
    '=',
    '-',
    '_',
    ' ',
    '\n',
    '!',
    'é',
    '\u0000',
    'Ł',
    'ī',
    '😀',
  ];
  const picks = randomBytes(count * 13);
  const list: string[] = [];
  for (let n = 0; n < count; n += 1) {
    let text = '';
    const length = picks[n * 13]! % 13;
    for (let i = 1; i <= length; i += 1) text += alphabet[picks[n * 13 + i]! % alphabet.length];
    list.push(text);
  }
  return list;
}

describe('isStandardBase64', () => {
  it('answers as the regular expression does, for canonical, non-canonical and broken text', () => {
    const differing = strings(20_000).filter(
      (text) => isStandardBase64(text) !== expression.test(text),
    );
    expect(differing).toEqual([]);
  });

  it('answers as the expression for every character up to U+2FFF at each place of a quartet', () => {
    const shapes = ['QUJ#', '#UJD', 'QU#=', 'Q#==', '#===', 'QUJDQU#D', 'QQ==#UJD', 'QUJD===#'];
    const differing: string[] = [];
    for (let code = 0; code < 0x3000; code += 1) {
      for (const shape of shapes) {
        const text = shape.replaceAll('#', String.fromCharCode(code));
        if (isStandardBase64(text) !== expression.test(text)) differing.push(text);
      }
    }
    expect(differing).toEqual([]);
  });

  it('accepts padded base64 and refuses base64url, missing padding and characters past 255', () => {
    expect(isStandardBase64('')).toBe(true);
    expect(isStandardBase64('QUJD')).toBe(true);
    expect(isStandardBase64('QQ==')).toBe(true);
    expect(isStandardBase64('QR==')).toBe(true);
    expect(isStandardBase64('-_-_')).toBe(false);
    expect(isStandardBase64('QQ')).toBe(false);
    expect(isStandardBase64('ŁŁŁŁ')).toBe(false);
  });
});

describe('takeCheckedBase64', () => {
  it('gives the bytes a check decoded once, for large texts only, and nothing for text it refused', () => {
    const bytes = randomBytes(200_000);
    const text = bytes.toString('base64');
    expect(takeCheckedBase64(text)).toBeUndefined();
    expect(isStandardBase64(text)).toBe(true);
    // An equal text built apart finds it too; once taken, it is no longer kept.
    expect(takeCheckedBase64(`${text.slice(0, 10)}${text.slice(10)}`)).toEqual(bytes);
    expect(takeCheckedBase64(text)).toBeUndefined();

    expect(isStandardBase64('QUJD')).toBe(true);
    expect(takeCheckedBase64('QUJD')).toBeUndefined();
    const broken = `${text.slice(0, -4)}-_-_`;
    expect(isStandardBase64(broken)).toBe(false);
    expect(takeCheckedBase64(broken)).toBeUndefined();
  });

  it('keeps only the latest eight checked texts', () => {
    const texts = Array.from({ length: 9 }, () => randomBytes(20_000).toString('base64'));
    for (const text of texts) expect(isStandardBase64(text)).toBe(true);
    expect(takeCheckedBase64(texts[0] as string)).toBeUndefined();
    for (const text of texts.slice(1)) expect(takeCheckedBase64(text)).toBeDefined();
  });
});

/** `decodeBase64Bytes` over the UTF-8 bytes of `text`, placed after a prefix as in a frame. */
function decodedFromBytes(text: string): Uint8Array | undefined {
  const frame = Buffer.concat([Buffer.from('{"data":"'), Buffer.from(text), Buffer.from('"}')]);
  return decodeBase64Bytes(frame, 9, frame.length - 2);
}

describe('base64 in pieces, to and from bytes', () => {
  it('decodes bytes exactly when the expression accepts their text, short texts', () => {
    for (const text of strings(20_000)) {
      const bytes = decodedFromBytes(text);
      expect(bytes !== undefined, JSON.stringify(text)).toBe(expression.test(text));
      if (bytes !== undefined) expect(bytes).toEqual(Buffer.from(text, 'base64'));
    }
  });

  it('decodes large base64 over several pieces, and refuses it with one character wrong anywhere', () => {
    const wrong = ['=', '==', '-', '_', ' ', '\n', 'é', 'Ł', '\u0000', '', 'AAA'];
    fc.assert(
      fc.property(
        fc.integer({ min: 60_000, max: 200_000 }),
        fc.nat(),
        fc.constantFrom(...wrong),
        fc.boolean(),
        (size, where, bad, damage) => {
          const bytes = randomBytes(size);
          let text = bytes.toString('base64');
          if (damage) {
            const at = where % text.length;
            text = `${text.slice(0, at)}${bad}${text.slice(at + 1)}`;
          }
          const decoded = decodedFromBytes(text);
          expect(decoded !== undefined).toBe(expression.test(text));
          if (!damage) expect(decoded && Buffer.from(decoded).equals(bytes)).toBe(true);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('writes the same text as a whole encode, at any offset, for sizes around the pieces', () => {
    for (const size of [0, 1, 2, 3, 49_151, 49_152, 49_153, 98_304, 262_144, 262_145]) {
      const bytes = randomBytes(size);
      const out = Buffer.alloc(base64Length(size) + 5, 0x21);
      expect(writeBase64(out, 3, bytes)).toBe(3 + base64Length(size));
      expect(out.toString('latin1', 3, 3 + base64Length(size))).toBe(bytes.toString('base64'));
      expect(out.toString('latin1', 0, 3)).toBe('!!!');
      expect(out.toString('latin1', 3 + base64Length(size))).toBe('!!');
    }
  });
});
