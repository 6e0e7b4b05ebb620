import type { DeviceTokenClaims } from '../../protocol/device-token.ts';
import { deviceKey, type JoinFrame } from '../../protocol/relay-frames.ts';
import { memberRevocationKey, type ProjectRole } from '../../protocol/room-grant.ts';
import type { TokenSignature } from '../config/common.ts';
import { verifyDeviceToken, verifyRoomGrant, verifyRoomId } from '../tokens.ts';
import type { DeviceCheck } from './stored-device-check.ts';

/** Why a join was refused; every reason is reported to the client as `auth_failed`. */
export const joinRefusals = {
  badToken: 'the token is malformed, or not signed with this relay\u2019s secret',
  deviceMismatch: 'device does not match the device id of the token',
  foreignRoom:
    'the room id is not valid, or belongs to another user and the join has no valid grant for it',
  memberRemoved: 'the device’s user is no longer a member of this project',
  revoked: 'the device was revoked',
  unknownDevice: 'the token was not issued by the auth service, or its device was deleted',
} as const;

export type JoinRefusal = keyof typeof joinRefusals;

/** What an admitted device may do in its room: its user's role, and for a member its membership. */
export interface Access {
  role: ProjectRole;
  /** A member's: the key its membership's revocation is kept under (`memberRevocationKey`). */
  memberKey?: string;
  /** A member's: the membership its grant names. */
  memberId?: number;
}

/** A join the relay lets in: with the access of the device in the room. */
export interface Admitted {
  access: Access;
}

/** The access of a join when validation is off (no secret): everyone is an owner. */
const unchecked: Admitted = { access: { role: 'owner' } };
const ownerAccess: Admitted = { access: { role: 'owner' } };

export interface JoinCheck {
  /** Effective shared secret; '' skips token and room-id validation. */
  secret: string;
  signature: TokenSignature;
  /**
   * A device's (by key) Unix second of revocation: tokens issued up to then are refused. For a
   * membership's key (`memberRevocationKey`): the latest membership id removed.
   */
  revokedAt: (device: string) => number | undefined;
  /** The auth side's record of each device (stored token digest); undefined: signatures alone. */
  devices?: DeviceCheck | undefined;
}

/**
 * Checks a join locally, without calling the auth service: the token's signature, that
 * `device` is the token's device, and that the room id is signed for the token's user, or that
 * the join carries a grant of that room for the token's user whose membership was not removed.
 * The access of the device when the join may proceed, else the refusal.
 */
export function refuseJoin(frame: JoinFrame, check: JoinCheck): JoinRefusal | Admitted {
  const signed = refuseSigned(frame, check);
  return signed.refusal ?? signed.admitted;
}

type Signed =
  | { refusal: JoinRefusal; admitted?: undefined; claims?: undefined }
  | { refusal?: undefined; admitted: Admitted; claims?: DeviceTokenClaims };

function refuseSigned(frame: JoinFrame, check: JoinCheck): Signed {
  if (check.secret === '') return { admitted: unchecked };
  const claims = verifyDeviceToken(frame.token, check.secret, check.signature);
  if (claims === undefined) return { refusal: 'badToken' };
  if (deviceKey(frame.device) !== String(claims.deviceId)) return { refusal: 'deviceMismatch' };
  const owner = verifyRoomId(frame.room, check.secret);
  if (owner === undefined) return { refusal: 'foreignRoom' };
  let admitted = ownerAccess;
  if (owner !== claims.userId) {
    const grant = verifyRoomGrant(frame.grant, check.secret, frame.room, claims.userId);
    if (grant === undefined) return { refusal: 'foreignRoom' };
    const memberKey = memberRevocationKey(frame.room, claims.userId);
    const removed = check.revokedAt(memberKey);
    if (removed !== undefined && grant.memberId <= removed) return { refusal: 'memberRemoved' };
    admitted = { access: { role: grant.role, memberKey, memberId: grant.memberId } };
  }
  const revokedAt = check.revokedAt(String(claims.deviceId));
  if (revokedAt !== undefined && claims.issuedAt <= revokedAt) return { refusal: 'revoked' };
  return { admitted, claims };
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
): JoinRefusal | Admitted | Promise<JoinRefusal | Admitted> {
  const signed = refuseSigned(frame, check);
  if (signed.refusal !== undefined) return signed.refusal;
  if (signed.claims === undefined || check.devices === undefined) return signed.admitted;
  const issued = check.devices.verify(signed.claims, frame.token as string);
  if (typeof issued === 'boolean') return issued ? signed.admitted : 'unknownDevice';
  return issued.then((ok) => (ok ? refuseJoin(frame, check) : 'unknownDevice'));
}
