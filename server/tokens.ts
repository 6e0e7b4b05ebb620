/** Device tokens and room ids signed with the shared secret: issued by auth, checked by the relay. */

import {
  type DeviceTokenClaims,
  deviceTokenPayload,
  parseDeviceToken,
} from '../protocol/device-token.ts';
import {
  grantPayload,
  grantSignatureLength,
  type MemberRole,
  parseGrant,
} from '../protocol/room-grant.ts';
import {
  parseRoomId,
  roomIdPayload,
  roomIdRandomBytes,
  roomIdSignatureLength,
} from '../protocol/room-id.ts';
import type { TokenSignature } from './config/common.ts';
import { doubleDjb2, hmacHex, randomHex, safeEqual } from './hashing.ts';

function signPayload(signature: TokenSignature, secret: string, payload: string): string {
  return signature === 'djb2' ? doubleDjb2(secret, payload) : hmacHex(secret, payload);
}

/** `<userId>:<deviceId>:<timestamp>.<hash>` signed with the configured scheme. */
export function signDeviceToken(
  claims: DeviceTokenClaims,
  secret: string,
  signature: TokenSignature,
): string {
  const payload = deviceTokenPayload(claims);
  return `${payload}.${signPayload(signature, secret, payload)}`;
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

function roomSignature(secret: string, user: string, random: string): string {
  return hmacHex(secret, roomIdPayload(user, random)).slice(0, roomIdSignatureLength);
}

/** A room id `<userId>.<32 random hex>.<sig>` the relay can check without calling the auth service. */
export function createRoomId(userId: number, secret: string): string {
  const random = randomHex(roomIdRandomBytes);
  return `${roomIdPayload(String(userId), random)}.${roomSignature(secret, String(userId), random)}`;
}

/** The owner of a signed room id, or undefined when it is malformed or its signature is wrong. */
export function verifyRoomId(roomId: unknown, secret: string): number | undefined {
  const parts = parseRoomId(roomId);
  if (parts === undefined) return undefined;
  return safeEqual(parts.signature, roomSignature(secret, parts.user, parts.random))
    ? Number(parts.user)
    : undefined;
}

/** What a relay's credential signs, so that it can never pass for a device token or room id. */
const relayCredentialPurpose = 'sync-host relay feed';
/** How far a relay credential's time may be from the auth service's clock, in seconds. */
export const relayCredentialSkewSeconds = 300;
const relayCredentialShape = /^relay\.(\d{1,12})\.([0-9a-f]{64})$/;

/**
 * The bearer a relay sends to the auth service's relay feed: `relay.<unix s>.<HMAC-SHA256 of
 * "sync-host relay feed:<unix s>" keyed by the shared secret>`. Made fresh for each request; a
 * copy seen on the wire is good for a few minutes only.
 */
export function signRelayCredential(secret: string, nowSeconds: number): string {
  return `relay.${nowSeconds}.${hmacHex(secret, `${relayCredentialPurpose}:${nowSeconds}`)}`;
}

/** Whether `credential` was made with `secret` within the allowed clock skew (constant-time). */
export function verifyRelayCredential(
  credential: string | undefined,
  secret: string,
  nowSeconds: number,
): boolean {
  const match = relayCredentialShape.exec(credential ?? '');
  if (match === null || secret === '') return false;
  const [, time, mac] = match as unknown as [string, string, string];
  if (Math.abs(Number(time) - nowSeconds) > relayCredentialSkewSeconds) return false;
  return safeEqual(mac, hmacHex(secret, `${relayCredentialPurpose}:${time}`));
}

/** A room grant for member `userId` of the project whose room is `roomId` (protocol/room-grant.ts). */
export function signRoomGrant(
  secret: string,
  roomId: string,
  userId: number,
  memberId: number,
  role: MemberRole,
): string {
  const sig = hmacHex(secret, grantPayload(roomId, userId, memberId, role));
  return `${memberId}.${role}.${sig.slice(0, grantSignatureLength)}`;
}

/**
 * The membership and role a grant gives `userId` in `roomId`, or undefined when the grant is
 * malformed or not signed with `secret` for that room and user (constant-time).
 */
export function verifyRoomGrant(
  grant: unknown,
  secret: string,
  roomId: string,
  userId: number,
): { memberId: number; role: MemberRole } | undefined {
  const parts = parseGrant(grant);
  if (parts === undefined || secret === '') return undefined;
  const expected = hmacHex(secret, grantPayload(roomId, userId, parts.memberId, parts.role));
  if (!safeEqual(parts.signature, expected.slice(0, grantSignatureLength))) return undefined;
  return { memberId: parts.memberId, role: parts.role };
}
