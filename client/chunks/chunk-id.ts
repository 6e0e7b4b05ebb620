import { createHash } from 'node:crypto';
import { toBase64Url } from '../base64.ts';

/**
 * A chunk's id: `"s"` + base64url(SHA-256(bytes)) in the clear (the host checks it), `"h"` +
 * base64url(HMAC-SHA-256(chunk key, plaintext)) when sealed (only devices with the key can
 * check it, and the host cannot tell which content it stands for). Chunks are read and written
 * in Node only (files): the clear id is Node's SHA-256 on the calling thread, where WebCrypto's
 * digest first copied each 256 KiB chunk and cost a receiving device more than the hash itself
 * (docs/PERFORMANCE.md); the HMAC is WebCrypto's, with its `CryptoKey`.
 */

/** WebCrypto's digest and HMAC take ordinary buffers; every chunk is read into one. */
const buffer = (bytes: Uint8Array) => bytes as Uint8Array<ArrayBuffer>;

/** The id of a chunk kept in the clear. */
export async function plainChunkId(bytes: Uint8Array): Promise<string> {
  return `s${createHash('sha256').update(bytes).digest('base64url')}`;
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
