import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { TokenSignature } from '../config/common.ts';

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

function hmacHex(secret: string, payload: string): string {
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

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

export interface DeviceTokenClaims {
  userId: number;
  deviceId: number;
  /** Unix seconds at issue. */
  issuedAt: number;
}

const deviceTokenShape = /^([1-9]\d{0,14}):([1-9]\d{0,14}):(\d{1,12})\.([0-9a-f]{8}|[0-9a-f]{64})$/;

function signPayload(signature: TokenSignature, secret: string, payload: string): string {
  return signature === 'djb2' ? doubleDjb2(secret, payload) : hmacHex(secret, payload);
}

/** `<userId>:<deviceId>:<timestamp>.<hash>` signed with the configured scheme. */
export function signDeviceToken(
  claims: DeviceTokenClaims,
  secret: string,
  signature: TokenSignature,
): string {
  const payload = `${claims.userId}:${claims.deviceId}:${claims.issuedAt}`;
  return `${payload}.${signPayload(signature, secret, payload)}`;
}

/**
 * Parses a device token without checking its signature; undefined when it is not of the shape
 * `<userId>:<deviceId>:<timestamp>.<hash>`.
 */
export function parseDeviceToken(
  token: unknown,
): (DeviceTokenClaims & { hash: string; payload: string }) | undefined {
  if (typeof token !== 'string' || token.length > 255) return undefined;
  const match = deviceTokenShape.exec(token);
  if (match === null) return undefined;
  const [, user, device, issued, hash] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
  ];
  return {
    userId: Number(user),
    deviceId: Number(device),
    issuedAt: Number(issued),
    hash,
    payload: `${user}:${device}:${issued}`,
  };
}

/**
 * Checks a device token's shape and signature (constant-time). A token signed with the other
 * scheme than the configured one is refused: a djb2 token never passes when hmac is configured.
 */
export function verifyDeviceToken(
  token: unknown,
  secret: string,
  signature: TokenSignature,
): DeviceTokenClaims | undefined {
  const parsed = parseDeviceToken(token);
  if (parsed === undefined) return undefined;
  const expected = signPayload(signature, secret, parsed.payload);
  if (!safeEqual(parsed.hash, expected)) return undefined;
  return { userId: parsed.userId, deviceId: parsed.deviceId, issuedAt: parsed.issuedAt };
}

const roomIdShape = /^([1-9]\d{0,14})\.([0-9a-f]{32})\.([0-9a-f]{32})$/;

function roomSignature(secret: string, userId: string, random: string): string {
  return hmacHex(secret, `${userId}.${random}`).slice(0, 32);
}

/** A room id `<userId>.<32 random hex>.<sig>` the relay can check without calling the auth service. */
export function createRoomId(userId: number, secret: string): string {
  const random = randomHex(16);
  return `${userId}.${random}.${roomSignature(secret, String(userId), random)}`;
}

/** The owner of a signed room id, or undefined when it is malformed or its signature is wrong. */
export function verifyRoomId(roomId: unknown, secret: string): number | undefined {
  if (typeof roomId !== 'string') return undefined;
  const match = roomIdShape.exec(roomId);
  if (match === null) return undefined;
  const [, user, random, sig] = match as unknown as [string, string, string, string];
  return safeEqual(sig, roomSignature(secret, user, random)) ? Number(user) : undefined;
}
