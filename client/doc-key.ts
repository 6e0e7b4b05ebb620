import { digest } from 'lib0/hash/sha256';
import { toBase64Url } from './base64.ts';
import type { E2EKey } from './e2e-key.ts';

/** SHA-256's block size, in bytes, for HMAC. */
const blockBytes = 64;
const encoder = new TextEncoder();

/** HMAC-SHA-256 (RFC 2104) of `message` under a key of at most 64 bytes. */
export function hmacSha256(key: Uint8Array, message: Uint8Array): Uint8Array {
  const inner = new Uint8Array(blockBytes + message.length);
  const outer = new Uint8Array(blockBytes + 32);
  for (let i = 0; i < blockBytes; i += 1) {
    const byte = key[i] ?? 0;
    inner[i] = byte ^ 0x36;
    outer[i] = byte ^ 0x5c;
  }
  inner.set(message, blockBytes);
  outer.set(digest(inner), blockBytes);
  return digest(outer);
}

/**
 * The name a document goes by on the wire and on the host: its own name when it is not
 * encrypted; with a key, `h` and the base64url HMAC-SHA-256 of the name under `key.nameKey`
 * (44 characters), so the relay and the host's store never see a file or document name, and
 * devices with the same passphrase still agree on it. Computed without WebCrypto (whose HMAC
 * is asynchronous) so a provider can be built synchronously from a derived key.
 */
export function docKeyOf(name: string, key: E2EKey | undefined): string {
  if (key === undefined) return name;
  return `h${toBase64Url(hmacSha256(key.nameKey, encoder.encode(name)))}`;
}
