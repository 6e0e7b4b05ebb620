import type { Kysely } from 'kysely';
import type { MemberRevocation } from '../../protocol/room-grant.ts';
import type { Db } from './connect.ts';
import type { Database } from './schema.ts';

/** One deleted device, as the revocation feed hands it to relays. */
export interface DeviceRevocationEvent {
  /** Sequence number: increases with every deletion, never reused. */
  seq: number;
  deviceId: number;
  userId: number;
  /** Unix second of the deletion. */
  revokedAt: number;
}

/**
 * One removed membership (teams): the member `userId` loses the room `roomId`; its room grants
 * of membership `memberId` and older are refused from then on.
 */
export interface MemberRevocationEvent {
  seq: number;
  roomId: string;
  userId: number;
  memberId: number;
  /** Unix second of the removal. */
  revokedAt: number;
}

/** What the revocation feed carries: deleted devices and removed memberships, in one order. */
export type RevocationEvent = DeviceRevocationEvent | MemberRevocationEvent;

/** A removed membership, as recorded. */
export type RemovedMember = MemberRevocation;

/** A time as the Unix second the feed carries. */
export const unixSeconds = (at: Date): number => Math.floor(at.getTime() / 1000);

/** Records the deletion of `devices` at `revokedAt` (Unix seconds), inside the caller's transaction. */
export async function recordRevocations(
  trx: Kysely<Database>,
  devices: readonly { deviceId: number; userId: number }[],
  revokedAt: number,
): Promise<void> {
  if (devices.length === 0) return;
  await trx
    .insertInto('revocations')
    .values(devices.map(({ deviceId, userId }) => ({ deviceId, userId, revokedAt })))
    .execute();
}

/** Records removed memberships at `revokedAt` (Unix seconds), inside the caller's transaction. */
export async function recordMemberRevocations(
  trx: Kysely<Database>,
  members: readonly RemovedMember[],
  revokedAt: number,
): Promise<void> {
  if (members.length === 0) return;
  await trx
    .insertInto('revocations')
    .values(
      members.map(({ roomId, userId, memberId }) => ({
        deviceId: 0,
        userId,
        roomId,
        memberId,
        revokedAt,
      })),
    )
    .execute();
}

/** Up to `limit` revocations after sequence number `since`, oldest first. */
export async function revocationsSince(
  db: Db,
  since: number,
  limit: number,
): Promise<RevocationEvent[]> {
  const rows = await db.kysely
    .selectFrom('revocations')
    .select(['id', 'deviceId', 'userId', 'revokedAt', 'roomId', 'memberId'])
    .where('id', '>', since)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row): RevocationEvent => {
    const common = {
      seq: Number(row.id),
      userId: Number(row.userId),
      revokedAt: Number(row.revokedAt),
    };
    if (row.roomId !== null && row.memberId !== null) {
      return { ...common, roomId: row.roomId, memberId: Number(row.memberId) };
    }
    return { ...common, deviceId: Number(row.deviceId) };
  });
}

/**
 * The sequence numbers of the oldest device revocation and of the latest revocation still
 * recorded; both 0 when there is none. A relay whose cursor is below `oldest - 1` may have
 * missed pruned rows. Membership rows are never pruned, so they do not count for `oldest`.
 */
export async function revocationBounds(db: Db): Promise<{ oldest: number; latest: number }> {
  const row = await db.kysely
    .selectFrom('revocations')
    .select((eb) => [eb.fn.max('id').as('latest')])
    .executeTakeFirst();
  const devices = await db.kysely
    .selectFrom('revocations')
    .select((eb) => [eb.fn.min('id').as('oldest')])
    .where('roomId', 'is', null)
    .executeTakeFirst();
  const latest = Number(row?.latest ?? 0);
  return { oldest: Number(devices?.oldest ?? latest), latest };
}

/** Every ended membership still recorded (all of them: they are never pruned), oldest first. */
export async function memberRevocations(db: Db): Promise<MemberRevocationEvent[]> {
  const rows = await db.kysely
    .selectFrom('revocations')
    .select(['id', 'userId', 'revokedAt', 'roomId', 'memberId'])
    .where('roomId', 'is not', null)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    seq: Number(row.id),
    userId: Number(row.userId),
    revokedAt: Number(row.revokedAt),
    roomId: row.roomId as string,
    memberId: Number(row.memberId),
  }));
}

/**
 * Deletes the device revocations recorded before `before` (Unix seconds), except the latest one
 * (ended memberships stay: a room grant has no expiry, so a relay that was away for longer than
 * the retention still learns that it is void): it
 * stays so that the feed still tells a cursor of a replaced database (beyond the latest) from
 * one of this database, and so that no driver hands out a sequence number again. Resolves with
 * the number of rows deleted.
 */
export async function pruneRevocations(db: Db, before: number): Promise<number> {
  // Read first: MariaDB refuses a DELETE whose subquery reads the table it deletes from.
  const { latest } = await revocationBounds(db);
  if (latest === 0) return 0;
  const result = await db.kysely
    .deleteFrom('revocations')
    .where('revokedAt', '<', before)
    .where('id', '<', latest)
    .where('roomId', 'is', null)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/**
 * The memberships that go when projects or users are deleted, read inside the deleting
 * transaction (before the cascade): those of `projectIds`, and those held by `userId`.
 */
export async function membershipsOf(
  trx: Kysely<Database>,
  where: { projectIds?: readonly number[]; userId?: number },
): Promise<RemovedMember[]> {
  const found: RemovedMember[] = [];
  const base = () =>
    trx
      .selectFrom('projectMembers')
      .innerJoin('projects', 'projects.id', 'projectMembers.projectId')
      .select(['projectMembers.id', 'projectMembers.userId', 'projects.roomId']);
  const collect = (rows: { id: number | string; userId: number | string; roomId: string }[]) => {
    for (const row of rows) {
      found.push({ roomId: row.roomId, userId: Number(row.userId), memberId: Number(row.id) });
    }
  };
  if (where.projectIds !== undefined && where.projectIds.length > 0) {
    collect(await base().where('projectMembers.projectId', 'in', where.projectIds).execute());
  }
  if (where.userId !== undefined) {
    collect(await base().where('projectMembers.userId', '=', where.userId).execute());
  }
  return found;
}
