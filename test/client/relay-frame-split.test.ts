import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRelayFrame, parseWholeFrame } from '../../client/relay-frames.ts';
import { chunkAnswer } from '../../server/relay/chunk-frames.ts';
import { largeBase64, trailingDataFrames } from '../helpers/trailing-data-frames.ts';

/**
 * A `chunk` answer whose `data` is its last member is parsed without its data on the device: the
 * answer must be the whole parse's for every text, valid or not.
 */

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
        const parsed = parseRelayFrame(text);
        expect(parsed).toEqual(parseWholeFrame(text));
        if (parsed?.type === 'chunk') taken += 1;
      }),
      { numRuns: 1_500 },
    );
    expect(taken).toBeGreaterThan(300);
  });

  it('takes the host’s answer as it writes it', () => {
    const data = randomBytes(262_144);
    const text = chunkAnswer(9, `s${'A'.repeat(43)}`, data).toString('utf8');
    expect(parseRelayFrame(text)).toEqual({
      type: 'chunk',
      frame: { type: 'chunk', ref: 9, id: `s${'A'.repeat(43)}`, data: data.toString('base64') },
    });
  });
});
