import { describe, expect, it } from 'vitest';
import { payloadSpan } from '../../server/relay/payload-span.ts';

/** The payload's source text as the relay forwards it, cut out of the frame's bytes. */
function payloadSource(text: string): string | undefined {
  const bytes = Buffer.from(text);
  const span = payloadSpan(bytes);
  return span === undefined ? undefined : bytes.toString('utf8', span.start, span.end);
}

/** A random JSON value with awkward strings (quotes, backslashes, braces, unicode). */
function randomValue(depth: number, random: () => number): unknown {
  const pick = Math.floor(random() * (depth > 3 ? 4 : 7));
  const strings = ['', 'a"b', 'c\\', '{[}]', '\u00e9\u{1F600}', '\\"}', 'payload', '\n\t'];
  switch (pick) {
    case 0:
      return strings[Math.floor(random() * strings.length)];
    case 1:
      return Math.floor(random() * 1e6) / 7;
    case 2:
      return random() < 0.5;
    case 3:
      return null;
    case 4:
      return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(depth + 1, random));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = 0; i < Math.floor(random() * 4); i++) {
        object[strings[Math.floor(random() * strings.length)]!] = randomValue(depth + 1, random);
      }
      return object;
    }
  }
}

function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state / 2 ** 32;
  };
}

describe('payload source extraction', () => {
  it.each([
    ['{"to":"host","payload":{"a":1}}', '{"a":1}'],
    ['{ "payload" : { "a" : "}" } , "to":"host" }', '{ "a" : "}" }'],
    ['{"x":"\\"payload\\":{}","payload":{"k":"\\\\"}}', '{"k":"\\\\"}'],
    ['{"pay\\u006coad":{"escaped":"key"},"to":1}', '{"escaped":"key"}'],
    ['{"payload":{"first":1},"payload":{"last":2}}', '{"last":2}'],
    [
      '{"n":-1.5e+3,"t":true,"f":false,"z":null,"payload":{"big":123456789012345678901234567890}}',
      '{"big":123456789012345678901234567890}',
    ],
    ['\n\t{"payload":{}}', '{}'],
  ])('cuts the payload out of %s', (text, expected) => {
    expect(payloadSource(text)).toBe(expected);
  });

  it('is undefined without a payload member', () => {
    expect(payloadSource('{"to":"host"}')).toBeUndefined();
    expect(payloadSource('{}')).toBeUndefined();
  });

  it('yields the same value as JSON.parse for 2,000 random frames, compact and indented', () => {
    const random = seeded(42);
    for (let i = 0; i < 2_000; i++) {
      const frame = {
        to: 'host',
        before: randomValue(1, random),
        payload: { v: randomValue(1, random) },
        after: randomValue(1, random),
      };
      for (const text of [JSON.stringify(frame), JSON.stringify(frame, null, i % 3)]) {
        const source = payloadSource(text);
        expect(source).toBeDefined();
        expect(JSON.parse(source!)).toEqual(frame.payload);
      }
    }
  });
});
