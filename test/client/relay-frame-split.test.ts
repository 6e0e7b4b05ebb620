import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRelayFrame, parseWholeFrame, type RelayFrame } from '../../client/relay-frames.ts';
import { chunkAnswer } from '../../server/relay/chunk-frames.ts';
import { largeBase64, trailingDataFrames } from '../helpers/trailing-data-frames.ts';

/**
 * A `chunk` answer whose `data` is its last member is parsed from its bytes without its data on
 * the device: the answer must be the whole parse's for every text, valid or not.
 */

/** A frame as the whole parse gives it: its `decoded` bytes turned back into the base64 `data`. */
function asWhole(frame: RelayFrame | undefined): RelayFrame | undefined {
  if (frame?.type !== 'chunk' || frame.frame.type !== 'chunk') return frame;
  const { decoded, ...rest } = frame.frame;
  if (decoded === undefined) return frame;
  expect(rest.data).toBe('');
  return { type: 'chunk', frame: { ...rest, data: Buffer.from(decoded).toString('base64') } };
}

/** chunk answers (and others), their members before `data` some wrong or odd. */
const frames = trailingDataFrames([
  fc.constantFrom('"type":"chunk"', '"type":"chunk-stored"', '"type":"joined"', '"type":2'),
  fc.oneof(
    fc.integer({ min: -2, max: 2 ** 40 }).map((ref) => `"ref":${ref}`),
    fc.constant('"ref":"1"'),
  ),
  fc.constantFrom(`"id":"s${'A'.repeat(43)}"`, '"id":7', '"id":"é\\u0041"'),
  fc.option(fc.string({ maxLength: 20 }).map((v) => `"note":${JSON.stringify(v)}`)),
]);

/** Answers the device takes, their members before `data` in any order. */
const goodFrames = fc
  .tuple(
    fc.shuffledSubarray(['"type":"chunk"', '"ref":3', `"id":"s${'B'.repeat(43)}"`, '"x":"é"'], {
      minLength: 4,
    }),
    largeBase64,
  )
  .map(([members, data]) => `{${members.join(',')},"data":"${data}"}`);

describe('parsing a chunk answer without its trailing data', () => {
  it('gives the whole parse’s answer for every frame', () => {
    let taken = 0;
    fc.assert(
      fc.property(fc.oneof(frames, goodFrames), (text) => {
        const parsed = parseRelayFrame(Buffer.from(text));
        expect(asWhole(parsed)).toEqual(parseWholeFrame(text));
        expect(parseRelayFrame(text)).toEqual(parseWholeFrame(text));
        if (parsed?.type === 'chunk' && 'decoded' in parsed.frame) taken += 1;
      }),
      { numRuns: 1_500 },
    );
    expect(taken).toBeGreaterThan(300);
  });

  it('takes the host’s answer as it writes it', () => {
    const data = randomBytes(262_144);
    const parsed = parseRelayFrame(chunkAnswer(9, `s${'A'.repeat(43)}`, data));
    expect(parsed).toEqual({
      type: 'chunk',
      frame: { type: 'chunk', ref: 9, id: `s${'A'.repeat(43)}`, data: '', decoded: data },
    });
  });
});
