import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** djb2 over UTF-8 bytes: h = 5381; h = h*33 + byte, modulo 2^32. */
export function djb2(text: string): number {
  let h = 5381;
  for (const byte of Buffer.from(text, 'utf8')) h = (Math.imul(h, 33) + byte) >>> 0;
  return h;
}

const hex8 = (n: number): string => n.toString(16).padStart(8, '0');

/** The seed's double-djb2 keyed hash: djb2(secret + ":" + hex8(djb2(secret + ":" + payload))). */
export function doubleDjb2(secret: string, payload: string): string {
  return hex8(djb2(`${secret}:${hex8(djb2(`${secret}:${payload}`))}`));
}

/** HMAC-SHA256 of `payload` keyed with `secret`, as hex. */
export function hmacHex(secret: string, payload: string): string {
  return createHmac('sha256', secret).update(payload).digest('hex');
}

/** Equality of two strings in time that depends only on their lengths. */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  if (left.length !== right.length) {
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

/** SHA-256 hex digest: what token columns store instead of the token. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** `bytes` random bytes as hex (twice as many digits). */
export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}
