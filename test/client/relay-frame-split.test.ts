import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRelayFrame, parseWholeFrame } from '../../client/relay-frames.ts';
import { chunkAnswer } from '../../server/relay/chunk-frames.ts';

/**
 * A `chunk` answer whose `data` is its last member is parsed without its data on the device: the
 * answer must be the whole parse's for every text, valid or not.
 */

const base64 = fc
  .integer({ min: 12_288, max: 20_480 })
  .map((n) => randomBytes(n).toString('base64'));

const headMembers = fc
  .tuple(
    fc.constantFrom('"type":"chunk"', '"type":"chunk-stored"', '"type":"joined"', '"type":2'),
    fc.oneof(
      fc.integer({ min: -2, max: 2 ** 40 }).map((ref) => `"ref":${ref}`),
      fc.constant('"ref":"1"'),
    ),
    fc.constantFrom(`"id":"s${'A'.repeat(43)}"`, '"id":7', '"id":"é\\u0041"'),
    fc.option(fc.string({ maxLength: 20 }).map((v) => `"note":${JSON.stringify(v)}`)),
    fc.option(base64.map((d) => `"data":"${d.slice(0, 8)}"`)),
  )
  .chain((members) => fc.shuffledSubarray(members.filter((m) => m !== null) as string[]));

const tail = fc.oneof(
  base64.map((d) => `"data":"${d}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}\\u0041${d.slice(100)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}\\"${d.slice(100)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}\t${d.slice(100)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}é\u2028${d.slice(100)}"}`),
  base64.map((d) => `"data": "${d}"}`),
  base64.map((d) => `"data":"${d}" }`),
  base64.map((d) => `"data":"${d}"}}`),
  base64.map((d) => `"data":"${d}`),
  base64.map((d) => `"x":"a,"data":"${d}"}`),
  base64.map((d) => `"x":"\\"data":"${d}"}`),
);

const frames = fc
  .tuple(headMembers, tail, fc.constantFrom(',', ''))
  .map(([members, end, comma]) => `{${members.join(',')}${members.length > 0 ? comma : ''}${end}`);

/** Answers the device takes, their members before `data` in any order. */
const goodFrames = fc
  .tuple(
    fc.shuffledSubarray(['"type":"chunk"', '"ref":3', `"id":"s${'B'.repeat(43)}"`, '"x":"é"'], {
      minLength: 4,
    }),
    base64,
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
