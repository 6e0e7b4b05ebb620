import { toBase64Url } from '../base64.ts';

/**
 * A chunk's id: `"s"` + base64url(SHA-256(bytes)) in the clear (the host checks it), `"h"` +
 * base64url(HMAC-SHA-256(chunk key, plaintext)) when sealed (only devices with the key can
 * check it, and the host cannot tell which content it stands for). With WebCrypto, so the ids
 * are the same in a browser and in Node.
 */

/** WebCrypto's digest and HMAC take ordinary buffers; every chunk is read into one. */
const buffer = (bytes: Uint8Array) => bytes as Uint8Array<ArrayBuffer>;

/** The id of a chunk kept in the clear. */
export async function plainChunkId(bytes: Uint8Array): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', buffer(bytes));
  return `s${toBase64Url(new Uint8Array(digest))}`;
}

/** The HMAC key of sealed chunks' ids, from the E2E key's `chunkKey` bytes. */
export function importChunkKey(chunkKey: Uint8Array): Promise<CryptoKey> {
  return globalThis.crypto.subtle.importKey(
    'raw',
    buffer(chunkKey),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
}

/** The id of a sealed chunk, from its plaintext. */
export async function sealedChunkId(key: CryptoKey, plain: Uint8Array): Promise<string> {
  const mac = await globalThis.crypto.subtle.sign('HMAC', key, buffer(plain));
  return `h${toBase64Url(new Uint8Array(mac))}`;
}

/** Whether two ids are equal, in a time that does not depend on where they differ. */
export function sameId(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i += 1) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
