/**
 * Base64 for bytes with the globals browsers and Node both have (`btoa`, `atob`), no import of
 * Node's `buffer`. Both ways take the engine's own codec when there is one: encoding through
 * `btoa` runs at about 13 MB/s (the binary string built 32 K characters at a time), Node's
 * Buffer at about 1 GB/s; the sync process encodes every update it sends, appends and logs, and
 * decodes every chunk of a large file it fetches.
 */
import { nodeBuffer } from '../protocol/base64.ts';

/** Characters per `String.fromCharCode` call, well under every engine's argument limit. */
const sliceLength = 0x8000;

/** `Uint8Array.prototype.toBase64` (recent browsers), when the engine has it. */
type WithToBase64 = Uint8Array & { toBase64?: () => string };

/** Encodes bytes as standard base64 (with padding). */
export function toBase64(bytes: Uint8Array): string {
  const native = (bytes as WithToBase64).toBase64;
  if (typeof native === 'function') return native.call(bytes);
  if (nodeBuffer !== undefined) {
    return nodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  }
  return portableToBase64(bytes);
}

/** `toBase64` with `btoa` alone (what a browser without `toBase64` runs). */
export function portableToBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let start = 0; start < bytes.length; start += sliceLength) {
    binary += String.fromCharCode(...bytes.subarray(start, start + sliceLength));
  }
  return btoa(binary);
}

/**
 * Decodes standard base64; undefined when `text` is not base64. In Node, Buffer decodes what it
 * re-encodes to the same text (canonical base64); anything else goes the `atob` way, which
 * decides as before.
 */
export function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  const decoded = nodeBuffer?.from(text, 'base64');
  if (decoded !== undefined && decoded.toString('base64') === text) {
    // A small Buffer is a view into a shared pool: copied, so no one reads the pool through it.
    const own = decoded.byteOffset === 0 && decoded.buffer.byteLength === decoded.length;
    return own ? new Uint8Array(decoded.buffer as ArrayBuffer) : new Uint8Array(decoded);
  }
  return portableFromBase64(text);
}

/** `fromBase64` with `atob` alone (what a browser runs). */
export function portableFromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  let binary: string;
  try {
    binary = atob(text);
  } catch (err: unknown) {
    if (err instanceof Error && err.name === 'InvalidCharacterError') return undefined;
    throw err;
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Encodes bytes as base64url without padding (safe in names and JSON without escapes). */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}
