/**
 * Standard base64 (with padding) as both sides check it, without importing Node's `buffer`: the
 * client library also runs in a browser.
 */

/** Bytes with the methods of Node's Buffer that this file and the frame code use. */
export interface NodeBytes extends Uint8Array {
  toString(encoding?: 'base64' | 'latin1' | 'utf8', start?: number, end?: number): string;
  write(text: string, offset: number, encoding: 'utf8' | 'latin1' | 'base64'): number;
  indexOf(value: number | Uint8Array, byteOffset?: number): number;
}

/** What this file and client/base64.ts use of Node's Buffer. */
interface NodeBufferClass {
  from(text: string, encoding: 'base64'): NodeBytes;
  from(buffer: ArrayBufferLike, offset: number, length: number): NodeBytes;
  byteLength(text: string, encoding: 'utf8'): number;
  allocUnsafe(size: number): NodeBytes;
  allocUnsafeSlow(size: number): NodeBytes & Uint8Array<ArrayBuffer>;
}

/** Node's Buffer when this runs in Node (a global there), undefined in a browser. */
export const nodeBuffer = (globalThis as { Buffer?: NodeBufferClass }).Buffer;

const standardBase64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Whether `text` is standard base64 with padding. The regular expression alone runs at about 50
 * to 70 MB/s (a third of the host's CPU while a device uploads a large file's chunks); in Node
 * `decodedIfStandard` accepts what is surely base64 first, and the expression decides only what
 * that did not accept, so the answer is the expression's.
 */
export function isStandardBase64(text: string): boolean {
  const bytes = decodedIfStandard(text);
  if (bytes !== undefined) {
    if (text.length >= keptMinChars) keep(text, bytes);
    return true;
  }
  return standardBase64.test(text);
}

/**
 * The bytes of `text` when Buffer shows it is standard base64 with padding, else undefined (the
 * expression decides). Buffer's decoder takes the 64 digits and base64url's `-` and `_`, and
 * skips or stops at anything else, so ASCII text of whole quartets without `-` and `_` that
 * decodes to every byte its length and padding promise holds digits only, `=` at its end. This
 * is a decode and three scans; decoding and encoding back to compare took twice as long.
 */
export function decodedIfStandard(text: string): Uint8Array | undefined {
  if (nodeBuffer === undefined || text.length % 4 !== 0) return undefined;
  if (nodeBuffer.byteLength(text, 'utf8') !== text.length) return undefined;
  if (text.includes('-') || text.includes('_')) return undefined;
  const bytes = nodeBuffer.from(text, 'base64');
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return bytes.length === (text.length / 4) * 3 - padding ? bytes : undefined;
}

/**
 * The large texts `isStandardBase64` accepted lately, with their bytes, newest last: a frame's
 * check and the decode that follows it (a chunk's bytes on the host, a fetched chunk on a device)
 * decode once. At most `keptMax`, so what is never taken is dropped soon.
 */
const kept: Array<{ text: string; bytes: Uint8Array }> = [];
const keptMax = 8;
const keptMinChars = 16_384;

function keep(text: string, bytes: Uint8Array): void {
  if (kept.length === keptMax) kept.shift();
  kept.push({ text, bytes });
}

/**
 * The bytes of `text` when `isStandardBase64` accepted it lately (its own buffer, no longer kept
 * here); undefined otherwise, to be decoded as usual.
 */
export function takeCheckedBase64(text: string): Uint8Array | undefined {
  for (let i = kept.length - 1; i >= 0; i -= 1) {
    const found = kept[i] as { text: string; bytes: Uint8Array };
    if (found.text.length === text.length && found.text === text) {
      kept.splice(i, 1);
      return found.bytes;
    }
  }
  return undefined;
}

/**
 * Large base64 goes to and from bytes in pieces of 64 KiB of text. A string over 128 KiB is a
 * large object to V8, given fresh memory pages by the system each time and handed back at the
 * next collection: a page fault every 4 KiB, and faults are dear in a virtual machine. Strings
 * of 64 KiB live in the young generation, whose pages are used again. On the machine of the
 * folder benchmark (docs/PERFORMANCE.md), a 256 KiB chunk's base64 took 1.2 to 1.5 ms as one
 * string and 0.06 ms in pieces.
 */
const pieceChars = 65_536;
const pieceBytes = (pieceChars / 4) * 3;

/** The length of the standard base64 (with padding) of `n` bytes. */
export function base64Length(n: number): number {
  return Math.ceil(n / 3) * 4;
}

/**
 * Writes the standard base64 of `bytes` into `target` at `at` (Node only), a piece at a time;
 * returns the offset after it.
 */
export function writeBase64(target: NodeBytes, at: number, bytes: Uint8Array): number {
  const source = nodeBuffer!.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let to = at;
  for (let i = 0; i < source.length; i += pieceBytes) {
    const piece = source.toString('base64', i, Math.min(i + pieceBytes, source.length));
    to += target.write(piece, to, 'latin1');
  }
  return to;
}

/**
 * The bytes of `text[start, end)` (the bytes of a frame) when they are standard base64 with
 * padding, decoded piece by piece into a buffer of their own (never a view of Node's shared
 * pool); undefined otherwise. Each piece is checked as
 * `decodedIfStandard` checks a string, padding allowed at the very end only, so a text passes
 * exactly when it would pass that check whole.
 */
export function decodeBase64Bytes(
  text: NodeBytes,
  start: number,
  end: number,
): (NodeBytes & Uint8Array<ArrayBuffer>) | undefined {
  const chars = end - start;
  if (nodeBuffer === undefined || chars % 4 !== 0) return undefined;
  const padding = chars > 0 && text[end - 1] === 0x3d ? (text[end - 2] === 0x3d ? 2 : 1) : 0;
  const out = nodeBuffer.allocUnsafeSlow((chars / 4) * 3 - padding);
  let to = 0;
  for (let i = start; i < end; i += pieceChars) {
    const stop = Math.min(i + pieceChars, end);
    const piece = text.toString('latin1', i, stop);
    if (nodeBuffer.byteLength(piece, 'utf8') !== piece.length) return undefined;
    if (piece.includes('-') || piece.includes('_')) return undefined;
    const expected = ((stop - i) / 4) * 3 - (stop === end ? padding : 0);
    if (out.write(piece, to, 'base64') !== expected) return undefined;
    to += expected;
  }
  return out;
}
