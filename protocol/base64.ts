/**
 * Standard base64 (with padding) as both sides check it, without importing Node's `buffer`: the
 * client library also runs in a browser.
 */

/** What this file and client/base64.ts use of Node's Buffer. */
interface NodeBufferClass {
  from(text: string, encoding: 'base64'): Uint8Array & { toString(encoding: 'base64'): string };
  from(
    buffer: ArrayBufferLike,
    offset: number,
    length: number,
  ): Uint8Array & {
    toString(encoding: 'base64'): string;
  };
  byteLength(text: string, encoding: 'utf8'): number;
  allocUnsafe(size: number): Uint8Array & {
    write(text: string, offset: number, encoding: 'utf8' | 'latin1'): number;
  };
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
