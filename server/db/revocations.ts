import type { Kysely } from 'kysely';
import type { Db } from './connect.ts';
import type { Database } from './schema.ts';

/** One deleted device, as the revocation feed hands it to relays. */
export interface RevocationEvent {
  /** Sequence number: increases with every deletion, never reused. */
  seq: number;
  deviceId: number;
  userId: number;
  /** Unix second of the deletion. */
  revokedAt: number;
}

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

/** Up to `limit` revocations after sequence number `since`, oldest first. */
export async function revocationsSince(
  db: Db,
  since: number,
  limit: number,
): Promise<RevocationEvent[]> {
  const rows = await db.kysely
    .selectFrom('revocations')
    .select(['id', 'deviceId', 'userId', 'revokedAt'])
    .where('id', '>', since)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    seq: Number(row.id),
    deviceId: Number(row.deviceId),
    userId: Number(row.userId),
    revokedAt: Number(row.revokedAt),
  }));
}

/**
 * The sequence numbers of the oldest and the latest revocation still recorded; both 0 when
 * there is none. A relay whose cursor is below `oldest - 1` may have missed pruned rows.
 */
export async function revocationBounds(db: Db): Promise<{ oldest: number; latest: number }> {
  const row = await db.kysely
    .selectFrom('revocations')
    .select((eb) => [eb.fn.min('id').as('oldest'), eb.fn.max('id').as('latest')])
    .executeTakeFirst();
  return { oldest: Number(row?.oldest ?? 0), latest: Number(row?.latest ?? 0) };
}

/**
 * Deletes the revocations recorded before `before` (Unix seconds), except the latest one: it
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
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
