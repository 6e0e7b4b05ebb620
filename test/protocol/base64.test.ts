import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isStandardBase64, takeCheckedBase64 } from '../../protocol/base64.ts';

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
