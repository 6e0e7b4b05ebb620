import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitTrailingData } from '../../protocol/trailing-data.ts';
import { type InboundFrame, parseFrame, parseFrameBytes } from '../../server/relay/messages.ts';
import { trailingDataFrames } from '../helpers/trailing-data-frames.ts';

/**
 * A `chunk-put` or `append` whose `data` is its last member is parsed without its data (its base64 checked
 * and decoded on its own): the answer must be parseFrame's for every text, valid or not.
 */

/** A frame as parseFrame gives it: its `decoded` bytes turned back into the base64 `data`. */
function asWhole(frame: InboundFrame): InboundFrame {
  if (!('decoded' in frame) || frame.decoded === undefined) return frame;
  const { decoded, ...rest } = frame;
  expect(rest.data).toBe('');
  return { ...rest, data: decoded.toString('base64') };
}

const chunkId = fc.constantFrom(
  `s${'A'.repeat(43)}`,
  `s${'b'.repeat(43)}`,
  'not an id',
  `s${'A'.repeat(42)}é`,
);

/** chunk-put and append frames (and others), their members before `data` some wrong or odd. */
const frames = trailingDataFrames([
  fc.constantFrom('"type":"chunk-put"', '"type":"append"', '"type":"chunk-get"', '"type":1'),
  fc.oneof(
    fc.integer({ min: -2, max: 2 ** 40 }).map((ref) => `"ref":${ref}`),
    fc.constant('"ref":"1"'),
  ),
  chunkId.map((id) => `"id":${JSON.stringify(id)}`),
  fc.option(fc.constantFrom('"doc":"notes.md"', '"covers":3', '"part":{"m":"a1","i":0,"n":2}')),
  fc.option(fc.constantFrom('"kc":"0123456789abcdef"', '"kc":"x"', '"kp":"a\\"b"')),
  fc.option(fc.string({ maxLength: 20 }).map((v) => `"note":${JSON.stringify(v)}`)),
]);

describe('parsing a chunk-put without its trailing data', () => {
  it('gives parseFrame’s answer for every frame, split or not', () => {
    let split = 0;
    fc.assert(
      fc.property(frames, (text) => {
        const bytes = Buffer.from(text);
        if (splitTrailingData(bytes) !== undefined) split += 1;
        expect(asWhole(parseFrameBytes(bytes))).toEqual(parseFrame(text));
      }),
      { numRuns: 1_500 },
    );
    // The property is about the split: a good share of the frames must take it.
    expect(split).toBeGreaterThan(100);
  });

  it('splits the client’s spellings of chunk-put and append, and leaves small frames whole', () => {
    const data = randomBytes(16_384).toString('base64');
    const frame = { type: 'chunk-put', ref: 7, id: `s${'A'.repeat(43)}`, data };
    const text = JSON.stringify(frame);
    const split = splitTrailingData(Buffer.from(text));
    expect(split?.bytes.toString('base64')).toBe(data);
    expect(parseFrameBytes(Buffer.from(text))).toEqual({
      ...frame,
      data: '',
      decoded: split?.bytes,
    });
    const small = JSON.stringify({ ...frame, data: data.slice(0, 4_000) });
    expect(splitTrailingData(Buffer.from(small))).toBeUndefined();
    const append = { type: 'append', doc: 'notes.md', ref: 8, part: { m: 'a1', i: 0, n: 2 }, data };
    const appended = parseFrameBytes(Buffer.from(JSON.stringify(append)));
    expect(asWhole(appended)).toEqual(append);
    expect('decoded' in appended).toBe(true);
  });
});
