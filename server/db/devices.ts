import { randomHex, sha256Hex } from '../hashing.ts';
import type { Db } from './connect.ts';
import { insertReturningId } from './insert.ts';
import { recordRevocations, unixSeconds } from './revocations.ts';
import { type DeviceRow, toIso } from './schema.ts';
import { toUser, type User } from './users.ts';

/** A device as the API shows it (never its token). */
export interface Device {
  id: number;
  userId: number;
  deviceName: string;
  platform: string;
  createdAt: string;
  lastSeen: string;
}

export const toDevice = (row: Omit<DeviceRow, 'token'>): Device => ({
  id: Number(row.id),
  userId: Number(row.userId),
  deviceName: row.deviceName,
  platform: row.platform,
  createdAt: toIso(row.createdAt),
  lastSeen: toIso(row.lastSeen),
});

const publicColumns = ['id', 'userId', 'deviceName', 'platform', 'createdAt', 'lastSeen'] as const;

export type CreateDeviceResult = { device: Device; token: string } | { limited: true };

/**
 * Creates a device and stores the SHA-256 digest of the token `signToken` issues for its id.
 * The row is first written with a random placeholder digest, then given the real one, in one
 * transaction, because the token embeds the device id. The user's devices are counted against
 * `limit` in that transaction, which locks the user's subscription row (PostgreSQL/MySQL;
 * SQLite serializes writers anyway), so concurrent registrations cannot pass it together.
 */
export async function createDevice(
  db: Db,
  input: { userId: number; deviceName: string; platform: string },
  now: Date,
  signToken: (deviceId: number) => string,
  limit: number,
): Promise<CreateDeviceResult> {
  return db.kysely.transaction().execute(async (trx): Promise<CreateDeviceResult> => {
    const at = db.date(now);
    const { userId, deviceName, platform } = input;
    if (db.driver !== 'sqlite') {
      await trx
        .selectFrom('subscriptions')
        .select('id')
        .where('userId', '=', userId)
        .forUpdate()
        .execute();
    }
    const { count } = await trx
      .selectFrom('devices')
      .select((eb) => eb.fn.countAll<number | string | bigint>().as('count'))
      .where('userId', '=', userId)
      .executeTakeFirstOrThrow();
    if (Number(count) >= limit) return { limited: true };
    const id = await insertReturningId(
      { ...db, kysely: trx },
      trx.insertInto('devices').values({
        userId,
        deviceName,
        platform,
        token: sha256Hex(randomHex(32)),
        createdAt: at,
        lastSeen: at,
      }),
    );
    const token = signToken(id);
    await trx
      .updateTable('devices')
      .set({ token: sha256Hex(token) })
      .where('id', '=', id)
      .execute();
    const iso = now.toISOString();
    return { device: { id, userId, deviceName, platform, createdAt: iso, lastSeen: iso }, token };
  });
}

/** The device with this id, its stored token digest and its user, in one query. */
export async function findDeviceForAuth(
  db: Db,
  id: number,
): Promise<{ device: Device; tokenDigest: string; user: User } | undefined> {
  const row = await db.kysely
    .selectFrom('devices')
    .innerJoin('users', 'users.id', 'devices.userId')
    .select([
      'devices.id',
      'devices.userId',
      'devices.deviceName',
      'devices.platform',
      'devices.token',
      'devices.createdAt',
      'devices.lastSeen',
      'users.email',
      'users.createdAt as userCreatedAt',
    ])
    .where('devices.id', '=', id)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    device: toDevice(row),
    tokenDigest: row.token,
    user: toUser({ id: row.userId, email: row.email, createdAt: row.userCreatedAt }),
  };
}

export async function listDevices(db: Db, userId: number): Promise<Device[]> {
  const rows = await db.kysely
    .selectFrom('devices')
    .select(publicColumns)
    .where('userId', '=', userId)
    .orderBy('id')
    .execute();
  return rows.map(toDevice);
}

export async function touchDevice(db: Db, id: number, now: Date): Promise<void> {
  await db.kysely
    .updateTable('devices')
    .set({ lastSeen: db.date(now) })
    .where('id', '=', id)
    .execute();
}

/** The owner of a device, or undefined when the id is unknown. */
export async function deviceOwner(db: Db, deviceId: number): Promise<number | undefined> {
  const row = await db.kysely
    .selectFrom('devices')
    .select('userId')
    .where('id', '=', deviceId)
    .executeTakeFirst();
  return row === undefined ? undefined : Number(row.userId);
}

/** What a relay checks a device token against: the owner and the stored token digest. */
export async function deviceDigest(
  db: Db,
  deviceId: number,
): Promise<{ userId: number; tokenDigest: string } | undefined> {
  const row = await db.kysely
    .selectFrom('devices')
    .select(['userId', 'token'])
    .where('id', '=', deviceId)
    .executeTakeFirst();
  return row === undefined ? undefined : { userId: Number(row.userId), tokenDigest: row.token };
}

/**
 * Deletes a device and records its revocation (the relays' feed) in one transaction; `userId`
 * limits it to that user's devices (undefined: administrator). `now` is the time of deletion.
 */
export async function deleteDevice(
  db: Db,
  id: number,
  userId: number | undefined,
  now: Date,
): Promise<boolean> {
  return db.kysely.transaction().execute(async (trx) => {
    let query = trx.deleteFrom('devices').where('id', '=', id);
    if (userId !== undefined) query = query.where('userId', '=', userId);
    const owner =
      userId ??
      (await trx.selectFrom('devices').select('userId').where('id', '=', id).executeTakeFirst())
        ?.userId;
    const result = await query.executeTakeFirst();
    if (Number(result.numDeletedRows) === 0 || owner === undefined) return false;
    await recordRevocations(trx, [{ deviceId: id, userId: Number(owner) }], unixSeconds(now));
    return true;
  });
}
