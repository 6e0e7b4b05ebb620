import { randomBytes } from 'node:crypto';
import fc from 'fast-check';

/**
 * Text frames that end with a `data` member, or nearly: what a parse that takes the trailing data
 * on its own (the host's `parseFrameBytes`, the device's `parseRelayFrame`) must answer exactly
 * as a whole JSON parse does.
 */

/** Base64 of 12 to 20 KiB: frames past the size below which nothing is split. */
export const largeBase64 = fc
  .integer({ min: 12_288, max: 20_480 })
  .map((n) => randomBytes(n).toString('base64'));

/** The trailing data member, well formed or one of its near misses. */
const tail = fc.oneof(
  largeBase64.map((d) => `"data":"${d}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, -1)}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, 100)}\\u0041${d.slice(100)}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, 100)}\\"${d.slice(100)}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, 100)}\t${d.slice(100)}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, 100)}é\u2028${d.slice(100)}"}`),
  largeBase64.map((d) => `"data":"${d.slice(0, 100)}-_${d.slice(102)}"}`),
  largeBase64.map((d) => `"data": "${d}"}`),
  largeBase64.map((d) => `"data":"${d}" }`),
  largeBase64.map((d) => `"data":"${d}"}}`),
  largeBase64.map((d) => `"data":"${d}`),
  largeBase64.map((d) => `"x":"a,"data":"${d}"}`),
  largeBase64.map((d) => `"x":"\\"data":"${d}"}`),
);

/**
 * Frames of `members` (each present or not, in any order; a short `data` member among them
 * makes a duplicate) followed by one of the tails above.
 */
export function trailingDataFrames(
  members: ReadonlyArray<fc.Arbitrary<string | null>>,
): fc.Arbitrary<string> {
  const head = fc
    .tuple(...members, fc.option(largeBase64.map((d) => `"data":"${d.slice(0, 8)}"`)))
    .chain((picked) => fc.shuffledSubarray(picked.filter((m) => m !== null) as string[]));
  return fc
    .tuple(head, tail, fc.constantFrom(',', ''))
    .map(([m, end, comma]) => `{${m.join(',')}${m.length > 0 ? comma : ''}${end}`);
}
