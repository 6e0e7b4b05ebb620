import { deviceKey, type JoinFrame } from '../../protocol/relay-frames.ts';
import type { TokenSignature } from '../config/common.ts';
import { verifyDeviceToken, verifyRoomId } from '../tokens.ts';

/** Why a join was refused; every reason is reported to the client as `auth_failed`. */
export const joinRefusals = {
  badToken: 'the token is malformed, or not signed with this relay\u2019s secret',
  deviceMismatch: 'device does not match the device id of the token',
  foreignRoom: 'the room id is not valid or belongs to another user',
  revoked: 'the device was revoked',
} as const;

export type JoinRefusal = keyof typeof joinRefusals;

export interface JoinCheck {
  /** Effective shared secret; '' skips token and room-id validation. */
  secret: string;
  signature: TokenSignature;
  /** Device key → Unix second of revocation: tokens issued up to then are refused. */
  revoked: ReadonlyMap<string, number>;
}

/**
 * Checks a join locally, without calling the auth service: the token's signature, that
 * `device` is the token's device, and that the room id is signed for the token's user.
 * Undefined when the join may proceed.
 */
export function refuseJoin(frame: JoinFrame, check: JoinCheck): JoinRefusal | undefined {
  if (check.secret === '') return undefined;
  const claims = verifyDeviceToken(frame.token, check.secret, check.signature);
  if (claims === undefined) return 'badToken';
  if (deviceKey(frame.device) !== String(claims.deviceId)) return 'deviceMismatch';
  if (verifyRoomId(frame.room, check.secret) !== claims.userId) return 'foreignRoom';
  const revokedAt = check.revoked.get(String(claims.deviceId));
  if (revokedAt !== undefined && claims.issuedAt <= revokedAt) return 'revoked';
  return undefined;
}
