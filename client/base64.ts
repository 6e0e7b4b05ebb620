/**
 * Base64 for bytes with what browsers and Node both have (`TextDecoder`, `atob`), no import of
 * Node's `buffer`. Both ways take the engine's own codec first when there is one (a browser's
 * `Uint8Array.prototype.toBase64`, Node's Buffer at about 1 GB/s): the sync process encodes every
 * update it sends, appends and logs, and decodes every chunk of a large file it fetches.
 */
import { decodedIfStandard, nodeBuffer, takeCheckedBase64 } from '../protocol/base64.ts';

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** The character code of each of the 64 digits. */
const digits = Uint8Array.from(alphabet, (char) => char.charCodeAt(0));
const equals = 61;
/** ASCII bytes to a string in one call (latin1 maps them one to one). */
const ascii = new TextDecoder('latin1');

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

/**
 * `toBase64` without an engine codec: digit by digit into a byte array turned into a string at
 * once, a 256 KiB file chunk in about a millisecond, where `btoa` over a binary string built
 * with `String.fromCharCode` took some 40.
 */
export function portableToBase64(bytes: Uint8Array): string {
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  const whole = bytes.length - (bytes.length % 3);
  let o = 0;
  for (let i = 0; i < whole; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[o++] = digits[n >>> 18]!;
    out[o++] = digits[(n >>> 12) & 63]!;
    out[o++] = digits[(n >>> 6) & 63]!;
    out[o++] = digits[n & 63]!;
  }
  const rest = bytes.length - whole;
  if (rest > 0) {
    const n = (bytes[whole]! << 16) | (rest === 2 ? bytes[whole + 1]! << 8 : 0);
    out[o++] = digits[n >>> 18]!;
    out[o++] = digits[(n >>> 12) & 63]!;
    out[o++] = rest === 2 ? digits[(n >>> 6) & 63]! : equals;
    out[o++] = equals;
  }
  return ascii.decode(out);
}

/**
 * Decodes standard base64; undefined when `text` is not base64. A text the frame schema checked
 * just before is not decoded again (`takeCheckedBase64`). In Node, Buffer decodes what is surely
 * standard base64 (`decodedIfStandard`); anything else goes the `atob` way, which decides as
 * before.
 */
export function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  const checked = takeCheckedBase64(text);
  if (checked !== undefined) return ownBytes(checked);
  const decoded = decodedIfStandard(text);
  return decoded === undefined ? portableFromBase64(text) : ownBytes(decoded);
}

/** Bytes in an ArrayBuffer of their own: a small Buffer is a view into a shared pool. */
function ownBytes(decoded: Uint8Array): Uint8Array<ArrayBuffer> {
  const own = decoded.byteOffset === 0 && decoded.buffer.byteLength === decoded.length;
  return own ? new Uint8Array(decoded.buffer as ArrayBuffer) : new Uint8Array(decoded);
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
