import type { DeviceTokenClaims } from '../../protocol/device-token.ts';
import { deviceKey, type JoinFrame } from '../../protocol/relay-frames.ts';
import type { TokenSignature } from '../config/common.ts';
import { verifyDeviceToken, verifyRoomId } from '../tokens.ts';
import type { DeviceCheck } from './stored-device-check.ts';

/** Why a join was refused; every reason is reported to the client as `auth_failed`. */
export const joinRefusals = {
  badToken: 'the token is malformed, or not signed with this relay\u2019s secret',
  deviceMismatch: 'device does not match the device id of the token',
  foreignRoom: 'the room id is not valid or belongs to another user',
  revoked: 'the device was revoked',
  unknownDevice: 'the token was not issued by the auth service, or its device was deleted',
} as const;

export type JoinRefusal = keyof typeof joinRefusals;

export interface JoinCheck {
  /** Effective shared secret; '' skips token and room-id validation. */
  secret: string;
  signature: TokenSignature;
  /** A device's (by key) Unix second of revocation: tokens issued up to then are refused. */
  revokedAt: (device: string) => number | undefined;
  /** The auth side's record of each device (stored token digest); undefined: signatures alone. */
  devices?: DeviceCheck | undefined;
}

/**
 * Checks a join locally, without calling the auth service: the token's signature, that
 * `device` is the token's device, and that the room id is signed for the token's user.
 * Undefined when the join may proceed.
 */
export function refuseJoin(frame: JoinFrame, check: JoinCheck): JoinRefusal | undefined {
  return refuseSigned(frame, check)?.refusal;
}

function refuseSigned(
  frame: JoinFrame,
  check: JoinCheck,
): { refusal: JoinRefusal | undefined; claims?: DeviceTokenClaims } | undefined {
  if (check.secret === '') return undefined;
  const claims = verifyDeviceToken(frame.token, check.secret, check.signature);
  if (claims === undefined) return { refusal: 'badToken' };
  if (deviceKey(frame.device) !== String(claims.deviceId)) return { refusal: 'deviceMismatch' };
  if (verifyRoomId(frame.room, check.secret) !== claims.userId) return { refusal: 'foreignRoom' };
  const revokedAt = check.revokedAt(String(claims.deviceId));
  if (revokedAt !== undefined && claims.issuedAt <= revokedAt) return { refusal: 'revoked' };
  return { refusal: undefined, claims };
}

/**
 * `refuseJoin`, then the token against the auth side's record of its device (when the relay has
 * one): a token whose signature passes but that was never issued, or whose device was deleted,
 * is refused whatever the signature scheme. Answers at once when the device is cached, else
 * with a promise; after waiting, the local checks run again (a revocation may have come meanwhile).
 */
export function checkJoin(
  frame: JoinFrame,
  check: JoinCheck,
): JoinRefusal | undefined | Promise<JoinRefusal | undefined> {
  const signed = refuseSigned(frame, check);
  if (signed?.claims === undefined || check.devices === undefined) return signed?.refusal;
  const issued = check.devices.verify(signed.claims, frame.token as string);
  if (typeof issued === 'boolean') return issued ? undefined : 'unknownDevice';
  return issued.then((ok) => (ok ? refuseJoin(frame, check) : 'unknownDevice'));
}
