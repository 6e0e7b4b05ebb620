import type { Tier } from '../../protocol/tiers.ts';
import type { Db } from './connect.ts';
import { insertReturningId, isUniqueViolation } from './insert.ts';
import {
  membershipsOf,
  type RemovedMember,
  recordMemberRevocations,
  recordRevocations,
  unixSeconds,
} from './revocations.ts';
import { type SubscriptionRow, toIso, type UserRow } from './schema.ts';

/** A user as the API shows it. */
export interface User {
  id: number;
  email: string;
  createdAt: string;
}

export interface Subscription {
  tier: Tier;
  expiresAt: string | null;
}

export const toUser = (row: UserRow): User => ({
  id: Number(row.id),
  email: row.email,
  createdAt: toIso(row.createdAt),
});

export async function findUserById(db: Db, id: number): Promise<User | undefined> {
  const row = await db.kysely
    .selectFrom('users')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirst();
  return row && toUser(row);
}

export async function findUserByEmail(db: Db, email: string): Promise<User | undefined> {
  const row = await db.kysely
    .selectFrom('users')
    .selectAll()
    .where('email', '=', email)
    .executeTakeFirst();
  return row && toUser(row);
}

/** The tier of the host's owner, whatever DEFAULT_TIER says. */
export const ownerTier: Tier = 'pro';

/**
 * Returns the user with this e-mail, creating it (with a subscription of `tier`) when new.
 * The owner (the user with `ownerEmail` when it is set, else the first user created) gets
 * `ownerTier` instead. Two concurrent creations of one e-mail end with one user: the loser
 * reads the winner's row.
 */
export async function findOrCreateUser(
  db: Db,
  email: string,
  tier: Tier,
  now: Date,
  ownerEmail?: string,
): Promise<User> {
  const existing = await findUserByEmail(db, email);
  if (existing) return existing;
  try {
    return await db.kysely.transaction().execute(async (trx) => {
      const tx = { ...db, kysely: trx };
      const id = await insertReturningId(
        tx,
        trx.insertInto('users').values({ email, createdAt: db.date(now) }),
      );
      const isOwner =
        ownerEmail !== undefined
          ? email === ownerEmail
          : (await trx
              .selectFrom('users')
              .select('id')
              .where('id', '<', id)
              .limit(1)
              .executeTakeFirst()) === undefined;
      await trx
        .insertInto('subscriptions')
        .values({
          userId: id,
          tier: isOwner ? ownerTier : tier,
          expiresAt: null,
          createdAt: db.date(now),
        })
        .execute();
      return { id, email, createdAt: now.toISOString() };
    });
  } catch (err: unknown) {
    if (!isUniqueViolation(err)) throw err;
    const winner = await findUserByEmail(db, email);
    if (!winner) throw err;
    return winner;
  }
}

export async function findSubscription(db: Db, userId: number): Promise<Subscription | undefined> {
  const row: Pick<SubscriptionRow, 'tier' | 'expiresAt'> | undefined = await db.kysely
    .selectFrom('subscriptions')
    .select(['tier', 'expiresAt'])
    .where('userId', '=', userId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    tier: row.tier as Tier,
    expiresAt: row.expiresAt === null ? null : toIso(row.expiresAt),
  };
}

/** Sets a user's tier and expiry (administrator action); creates the row when missing. */
export async function setSubscription(
  db: Db,
  userId: number,
  tier: Tier,
  expiresAt: Date | null,
  now: Date,
): Promise<void> {
  const expires = expiresAt === null ? null : db.date(expiresAt);
  const updated = await db.kysely
    .updateTable('subscriptions')
    .set({ tier, expiresAt: expires })
    .where('userId', '=', userId)
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) === 0) {
    await db.kysely
      .insertInto('subscriptions')
      .values({ userId, tier, expiresAt: expires, createdAt: db.date(now) })
      .execute();
  }
}

/**
 * Deletes a user (devices, projects, memberships and subscription go with it) and records the
 * revocation of each device and membership, in one transaction. Resolves with what was revoked,
 * or undefined when there is no such user.
 */
export async function deleteUser(
  db: Db,
  userId: number,
  now: Date,
): Promise<{ deviceIds: number[]; members: RemovedMember[] } | undefined> {
  return db.kysely.transaction().execute(async (trx) => {
    const devices = await trx
      .selectFrom('devices')
      .select('id')
      .where('userId', '=', userId)
      .execute();
    const owned = await trx
      .selectFrom('projects')
      .select('id')
      .where('userId', '=', userId)
      .execute();
    // The memberships that cascade: in the user's projects, and the user's in others'.
    const members = await membershipsOf(trx, {
      projectIds: owned.map((row) => Number(row.id)),
      userId,
    });
    const result = await trx.deleteFrom('users').where('id', '=', userId).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return undefined;
    const deviceIds = devices.map((row) => Number(row.id));
    await recordRevocations(
      trx,
      deviceIds.map((deviceId) => ({ deviceId, userId })),
      unixSeconds(now),
    );
    await recordMemberRevocations(trx, members, unixSeconds(now));
    return { deviceIds, members };
  });
}
