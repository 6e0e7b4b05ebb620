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
}

/** Node's Buffer when this runs in Node (a global there), undefined in a browser. */
export const nodeBuffer = (globalThis as { Buffer?: NodeBufferClass }).Buffer;

const standardBase64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Whether `text` is standard base64 with padding. The regular expression alone runs at about 50
 * to 70 MB/s (a third of the host's CPU while a device uploads a large file's chunks); in Node a
 * decode and re-encode through Buffer (about 1 GB/s) accepts canonical text first, and the
 * expression decides only what that did not accept, so the answer is the expression's.
 */
export function isStandardBase64(text: string): boolean {
  if (nodeBuffer?.from(text, 'base64').toString('base64') === text) return true;
  return standardBase64.test(text);
}
