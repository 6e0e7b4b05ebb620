/**
 * Room grants (teams): what lets a member's device into a room of another user. The auth service
 * hands one to the member with each shared project (`GET /auth/projects`); the device sends it
 * in its join (`grant`), and a relay checks it with the shared secret alone, as it checks room
 * ids. A grant is `<memberId>.<role>.<sig>`: the membership's row id, the member's role and the
 * first 32 hex digits of HMAC-SHA256(secret, `room-grant:<roomId>:<userId>:<memberId>:<role>`),
 * so it is good for one room and one user only. Removing a member (or changing its role) is
 * published as a revocation of that membership id and every older one of the same user and room.
 */

/** The roles a project's member may have. */
export const memberRoles = ['editor', 'viewer'] as const;
export type MemberRole = (typeof memberRoles)[number];
/** What a device may do in a room: its user owns the project, or is a member with a role. */
export type ProjectRole = 'owner' | MemberRole;

/** Hex digits of a grant's signature. */
export const grantSignatureLength = 32;
/** The longest grant a join may carry, in characters. */
export const maxGrantLength = 64;

const grantShape = /^([1-9]\d{0,14})\.(editor|viewer)\.([0-9a-f]{32})$/;

export interface GrantParts {
  memberId: number;
  role: MemberRole;
  signature: string;
}

/** The signed text of a grant. */
export function grantPayload(
  roomId: string,
  userId: number,
  memberId: number,
  role: MemberRole,
): string {
  return `room-grant:${roomId}:${userId}:${memberId}:${role}`;
}

/** Splits a grant into its parts without checking its signature; undefined when malformed. */
export function parseGrant(grant: unknown): GrantParts | undefined {
  if (typeof grant !== 'string') return undefined;
  const match = grantShape.exec(grant);
  if (match === null) return undefined;
  const [, memberId, role, signature] = match as unknown as [
    string,
    MemberRole,
    MemberRole,
    string,
  ];
  return { memberId: Number(memberId), role, signature };
}

/**
 * The key under which relays keep a membership's revocation, beside the devices' (which are
 * device ids, digits only): `member:<userId>@<roomId>`.
 */
export function memberRevocationKey(roomId: string, userId: number): string {
  return `member:${userId}@${roomId}`;
}

/** A membership that ended, as relays are told of it: refuse `userId`'s grants of `roomId` up to `memberId`. */
export interface MemberRevocation {
  roomId: string;
  userId: number;
  memberId: number;
}
