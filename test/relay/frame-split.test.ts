import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseFrame, parseFrameBytes, splitTrailingData } from '../../server/relay/messages.ts';

/**
 * A `chunk-put` or `append` whose `data` is its last member is parsed without its data (its base64 checked
 * on its own): the answer must be parseFrame's for every text, valid or not.
 */

/** Base64 of 12 to 20 KiB: frames past the size below which nothing is split. */
const base64 = fc
  .integer({ min: 12_288, max: 20_480 })
  .map((n) => randomBytes(n).toString('base64'));

const chunkId = fc.constantFrom(
  `s${'A'.repeat(43)}`,
  `s${'b'.repeat(43)}`,
  'not an id',
  `s${'A'.repeat(42)}é`,
);

/** The members before `data`, in any order, some of them wrong or odd. */
const headMembers = fc
  .tuple(
    fc.constantFrom('"type":"chunk-put"', '"type":"append"', '"type":"chunk-get"', '"type":1'),
    fc.oneof(
      fc.integer({ min: -2, max: 2 ** 40 }).map((ref) => `"ref":${ref}`),
      fc.constant('"ref":"1"'),
    ),
    chunkId.map((id) => `"id":${JSON.stringify(id)}`),
    fc.option(fc.constantFrom('"doc":"notes.md"', '"covers":3', '"part":{"m":"a1","i":0,"n":2}')),
    fc.option(fc.constantFrom('"kc":"0123456789abcdef"', '"kc":"x"', '"kp":"a\\"b"')),
    fc.option(fc.string({ maxLength: 20 }).map((v) => `"note":${JSON.stringify(v)}`)),
    fc.option(base64.map((d) => `"data":"${d.slice(0, 8)}"`)),
  )
  .chain((members) => fc.shuffledSubarray(members.filter((m) => m !== null) as string[]));

/** The trailing data member, well formed or one of its near misses. */
const tail = fc.oneof(
  base64.map((d) => `"data":"${d}"}`),
  base64.map((d) => `"data":"${d.slice(0, -1)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}\\u0041${d.slice(100)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}é${d.slice(100)}"}`),
  base64.map((d) => `"data":"${d.slice(0, 100)}-_${d.slice(102)}"}`),
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

describe('parsing a chunk-put without its trailing data', () => {
  it('gives parseFrame’s answer for every frame, split or not', () => {
    let split = 0;
    fc.assert(
      fc.property(frames, (text) => {
        const bytes = Buffer.from(text);
        if (splitTrailingData(bytes) !== undefined) split += 1;
        expect(parseFrameBytes(bytes)).toEqual(parseFrame(text));
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
    expect(split?.data).toBe(data);
    expect(parseFrameBytes(Buffer.from(text))).toEqual(frame);
    const small = JSON.stringify({ ...frame, data: data.slice(0, 4_000) });
    expect(splitTrailingData(Buffer.from(small))).toBeUndefined();
    const append = { type: 'append', doc: 'notes.md', ref: 8, part: { m: 'a1', i: 0, n: 2 }, data };
    expect(splitTrailingData(Buffer.from(JSON.stringify(append)))?.data).toBe(data);
    expect(parseFrameBytes(Buffer.from(JSON.stringify(append)))).toEqual(append);
  });
});
