import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isJsonObject } from '../../server/relay/json-scanner.ts';
import { parseFrame } from '../../server/relay/messages.ts';
import { recogniseRouted, spliceRoutedFrame } from '../../server/relay/routed-bytes.ts';

/** What JSON.parse says of the text: an object (not an array), or not. */
function parsesToObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function validate(text: string): boolean {
  const bytes = Buffer.from(text);
  return isJsonObject(bytes, 0, bytes.length);
}

/** Valid JSON texts indented with every kind of white space. */
const spaced = fc
  .tuple(fc.json({ maxDepth: 6 }), fc.constantFrom(' ', '\t', '\r', '\n', '  \n'))
  .map(([text, space]) => JSON.stringify(JSON.parse(text), null, space));

/** A JSON text with one character changed, inserted or removed: near misses of every rule. */
const mutated = fc
  .tuple(
    fc.json({ maxDepth: 4 }),
    fc.nat(),
    fc.constantFrom('delete', 'insert', 'replace'),
    fc.constantFrom(
      ...'{}[]:,"\\/ \t\n-+.eE0123456789tfnulrsabu\u0000\u001f\u00e9\u2028'.split(''),
    ),
  )
  .map(([text, at, how, c]) => {
    const i = at % (text.length + 1);
    if (how === 'delete') return text.slice(0, i) + text.slice(i + 1);
    if (how === 'insert') return text.slice(0, i) + c + text.slice(i);
    return text.slice(0, i) + c + text.slice(i + 1);
  });

describe('the byte-level JSON object check of the relay hot path', () => {
  it('accepts exactly what JSON.parse reads as an object, for valid and near-miss texts', () => {
    fc.assert(
      fc.property(fc.oneof(fc.json({ maxDepth: 6 }), spaced, mutated, fc.string()), (text) => {
        expect(validate(text)).toBe(parsesToObject(text));
      }),
      { numRuns: 5_000 },
    );
  });

  it('checks every rule of the grammar on hand-picked cases', () => {
    const valid = [
      '{}',
      '{ }',
      '{"a":1}',
      '{"a":-0.5e+10,"b":[1,2,{"c":null}],"d":true,"e":false}',
      '{"s":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude00"}',
      '{"a":"é😀"}',
      '{"a":{},"a":[]}',
      ' \t{"a" : [ 1 , 2 ] }\n',
    ];
    const invalid = [
      '',
      '[]',
      '"x"',
      '{',
      '{"a"}',
      '{"a":}',
      '{"a":1,}',
      '{"a":[1,]}',
      '{a:1}',
      "{'a':1}",
      '{"a":01}',
      '{"a":1.}',
      '{"a":.5}',
      '{"a":1e}',
      '{"a":+1}',
      '{"a":-}',
      '{"a":tru}',
      '{"a":nul}',
      '{"a":"\\x"}',
      '{"a":"\\a"}',
      '{"a":"\\u12g4"}',
      '{"a":"\u0001"}',
      '{"a":1}}',
      '{"a":1} {}',
      '{"a":NaN}',
      '{"a":[1}',
    ];
    for (const text of valid) expect([text, validate(text)]).toEqual([text, parsesToObject(text)]);
    for (const text of valid.slice(0, 7)) expect([text, validate(text)]).toEqual([text, true]);
    for (const text of invalid) expect([text, validate(text)]).toEqual([text, false]);
  });

  it('leaves objects nested deeper than 64 to JSON.parse', () => {
    const deep = `${'{"a":'.repeat(100)}1${'}'.repeat(100)}`;
    expect(parsesToObject(deep)).toBe(true);
    expect(validate(deep)).toBe(false);
    expect(parseFrame(`{"to":"host","payload":${deep}}`).type).toBe('route');
  });

  it('reads only the bytes it is given, not the frame around them', () => {
    const bytes = Buffer.from('{"a":[1}');
    // `{"a":[1` alone is not an object even though a `}` follows in the buffer
    expect(isJsonObject(bytes, 0, bytes.length - 1)).toBe(false);
    const inner = Buffer.from('{"to":1,"payload":{"b":2}}');
    expect(isJsonObject(inner, 18, inner.length - 1)).toBe(true);
    expect(isJsonObject(inner, 18, inner.length - 2)).toBe(false);
  });
});

const deviceTo = fc.oneof(
  fc.constantFrom('host', 'broadcast'),
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  fc.string({ minLength: 1, maxLength: 260 }),
);
const payloadText = fc.oneof(
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })).map((v) => JSON.stringify(v)),
  mutated,
);

describe('recognising {"to","payload"} frames on their bytes', () => {
  it('agrees with parseFrame on every frame it recognises, and splices the same outgoing frame', () => {
    fc.assert(
      fc.property(deviceTo, payloadText, (to, payload) => {
        const text = `{"to":${JSON.stringify(to)},"payload":${payload}}`;
        const data = Buffer.from(text);
        const routed = recogniseRouted(data);
        const parsed = parseFrame(text);
        if (routed === undefined) {
          // only what the fast path does not cover: the full parser may still route it
          const plainTo =
            typeof to === 'number'
              ? String(to).length <= 15
              : /^[\x20-\x7e]{1,255}$/.test(to) && !/["\\]/.test(to);
          if (plainTo && parsesToObject(payload)) expect.unreachable(`not recognised: ${text}`);
          return;
        }
        expect(parsed.type).toBe('route');
        if (parsed.type !== 'route') return;
        expect(routed.to).toBe(parsed.to);
        const head = Buffer.from('{"from":7,"to":');
        const room = Buffer.from(',"room":"r1"');
        const out = spliceRoutedFrame(data, routed.toEnd, head, room).toString();
        expect(out).toBe(`{"from":7,"to":${JSON.stringify(to)},"room":"r1","payload":${payload}}`);
        expect(JSON.parse(out)).toEqual({ from: 7, to, room: 'r1', payload: JSON.parse(payload) });
      }),
      { numRuns: 3_000 },
    );
  });

  it('leaves every other spelling to the full parser', () => {
    for (const text of [
      '{"to": 1,"payload":{}}',
      '{"payload":{},"to":1}',
      '{"to":1,"payload":{},"x":1}',
      '{"to":1,"payload":[]}',
      '{"to":01,"payload":{}}',
      '{"to":1.5,"payload":{}}',
      '{"to":-1,"payload":{}}',
      '{"to":1234567890123456,"payload":{}}',
      '{"to":"","payload":{}}',
      '{"to":"a\\"b","payload":{}}',
      '{"to":"é","payload":{}}',
      '{"to":"host","payload":{}} ',
      '{"to":"host","payload":{"a":1}',
      '{"to":"host","payload":{"a":1}}}',
      '{"type":"ping"}',
    ]) {
      expect([text, recogniseRouted(Buffer.from(text))]).toEqual([text, undefined]);
    }
  });
});
