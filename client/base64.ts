/** Base64 for bytes with the globals browsers and Node both have (`btoa`, `atob`), no Buffer. */

/** Characters per `String.fromCharCode` call, well under every engine's argument limit. */
const sliceLength = 0x8000;

/** Encodes bytes as standard base64 (with padding). */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let start = 0; start < bytes.length; start += sliceLength) {
    binary += String.fromCharCode(...bytes.subarray(start, start + sliceLength));
  }
  return btoa(binary);
}

/** Decodes standard base64; undefined when `text` is not base64. */
export function fromBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
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
