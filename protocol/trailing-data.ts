import { decodeBase64Bytes, type NodeBytes, nodeBuffer } from './base64.ts';

/**
 * The frames that carry bytes (a device's `chunk-put` and `append`, the host's `chunk` answer)
 * end with them, as their `data` member: `…,"data":"<base64>"}`. Both sides parse such a frame
 * without its data and decode the data on its own, straight from the frame's bytes: a 256 KiB
 * chunk is 350 kB of base64, and JSON.parse of it, the UTF-8 decode of the whole frame and one
 * large string of it were most of a transfer's time.
 *
 * The answer is the whole parse's: the data is taken only when it is base64 digits alone (no
 * backslash, quote or control character), so the frame with its data emptied is valid JSON
 * exactly when the frame is, with the same members but `data` (the last `data` wins in both).
 */

/** A frame split from its trailing data: its text with `data` emptied, and the data decoded. */
export interface SplitFrame {
  head: string;
  bytes: NodeBytes & Uint8Array<ArrayBuffer>;
}

/** `"data":"`, the start of the member such a frame ends with. */
const dataMember = new Uint8Array([0x22, 0x64, 0x61, 0x74, 0x61, 0x22, 0x3a, 0x22]);
/** Below this, a frame is parsed whole: the split pays off on a chunk's base64 only. */
const minSplitBytes = 16_384;

/**
 * The frame (its UTF-8 bytes, in Node) with its trailing `data` emptied and that data's bytes,
 * when the frame ends with a `data` member of standard base64; undefined otherwise (the frame
 * is then parsed whole).
 */
export function splitTrailingData(frame: NodeBytes): SplitFrame | undefined {
  const n = frame.length;
  if (nodeBuffer === undefined || n < minSplitBytes) return undefined;
  if (frame[n - 1] !== 0x7d || frame[n - 2] !== 0x22) return undefined;
  // the first `"data":"` in the frame: the data from there to the end is base64 (checked below,
  // and base64 has no quote) only when it is the last member
  const key = frame.indexOf(dataMember);
  if (key < 1) return undefined;
  const before = frame[key - 1];
  if (before !== 0x2c && before !== 0x7b) return undefined;
  const open = key + dataMember.length - 1;
  // digits only: no escape, no quote, no character outside ASCII (else parsed whole)
  const bytes = decodeBase64Bytes(frame, open + 1, n - 2);
  if (bytes === undefined) return undefined;
  return { head: `${frame.toString('utf8', 0, open + 1)}"}`, bytes };
}
