import { sha256Hex } from '../hashing.ts';
import type { Db } from './connect.ts';
import { type PairingRow, type PairingsTable, toIso } from './schema.ts';

/**
 * `offered`: approved by a signed-in device, its device created, waiting for the new device to
 * accept the account it would join (then `approved`) or decline it (then `denied`).
 */
export type PairingStatus = 'pending' | 'offered' | 'approved' | 'denied' | 'claimed' | 'expired';

/** How a pairing was approved: in the admin API or UI, by a signed-in device, by its e-mail link. */
export type ApprovedVia = 'admin' | 'device' | 'link';

/** A pairing as the service reads it (secrets only as digests, never in clear). */
export interface Pairing {
  id: number;
  code: string;
  deviceName: string;
  platform: string;
  email: string | null;
  clientAddress: string;
  status: PairingStatus;
  userId: number | null;
  deviceId: number | null;
  tokenIssuedAt: number | null;
  approvedVia: ApprovedVia | null;
  approverName: string | null;
  createdAt: string;
  expiresAt: string;
}

const toPairing = (row: PairingRow): Pairing => ({
  id: Number(row.id),
  code: row.code,
  deviceName: row.deviceName,
  platform: row.platform,
  email: row.email,
  clientAddress: row.clientAddress,
  status: row.status as PairingStatus,
  userId: row.userId === null ? null : Number(row.userId),
  deviceId: row.deviceId === null ? null : Number(row.deviceId),
  tokenIssuedAt: row.tokenIssuedAt === null ? null : Number(row.tokenIssuedAt),
  approvedVia: row.approvedVia as ApprovedVia | null,
  approverName: row.approverName,
  createdAt: toIso(row.createdAt),
  expiresAt: toIso(row.expiresAt),
});

/**
 * A pairing to store: the columns of a new row, except that `pairingId` and `linkToken` (null
 * when no e-mail was given) are in clear here and stored as their digests.
 */
export type NewPairing = Pick<
  PairingsTable,
  'pairingId' | 'code' | 'deviceName' | 'platform' | 'email' | 'clientAddress' | 'linkToken'
> & { createdAt: Date; expiresAt: Date };

/** Stores a pending pairing; the pairingId and link token as SHA-256 digests. */
export async function createPairing(db: Db, input: NewPairing): Promise<void> {
  await db.kysely
    .insertInto('pairings')
    .values({
      ...input,
      pairingId: sha256Hex(input.pairingId),
      linkToken: input.linkToken === null ? null : sha256Hex(input.linkToken),
      status: 'pending',
      createdAt: db.date(input.createdAt),
      expiresAt: db.date(input.expiresAt),
    })
    .execute();
}

/** The pairing a device polls with its pairingId. */
export async function findPairingById(db: Db, pairingId: string): Promise<Pairing | undefined> {
  const row = await db.kysely
    .selectFrom('pairings')
    .selectAll()
    .where('pairingId', '=', sha256Hex(pairingId))
    .executeTakeFirst();
  return row && toPairing(row);
}

/** The pending, unexpired pairing showing this (normalized) code. */
export async function findPendingByCode(
  db: Db,
  code: string,
  now: Date,
): Promise<Pairing | undefined> {
  const row = await db.kysely
    .selectFrom('pairings')
    .selectAll()
    .where('code', '=', code)
    .where('status', '=', 'pending')
    .where('expiresAt', '>', db.date(now))
    .orderBy('id', 'desc')
    .executeTakeFirst();
  return row && toPairing(row);
}

/** The pairing a magic link was sent for. */
export async function findPairingByLink(db: Db, linkToken: string): Promise<Pairing | undefined> {
  const row = await db.kysely
    .selectFrom('pairings')
    .selectAll()
    .where('linkToken', '=', sha256Hex(linkToken))
    .executeTakeFirst();
  return row && toPairing(row);
}

/** Pending pairings that have not expired, oldest first. */
export async function listPendingPairings(db: Db, now: Date): Promise<Pairing[]> {
  const rows = await db.kysely
    .selectFrom('pairings')
    .selectAll()
    .where('status', '=', 'pending')
    .where('expiresAt', '>', db.date(now))
    .orderBy('id')
    .execute();
  return rows.map(toPairing);
}

/**
 * Moves a pairing from one status to another with the given fields. Atomic on every driver: of
 * concurrent callers exactly one gets true (the conditional UPDATE), so an approval and a denial
 * of one code cannot both win, and an approved pairing is claimed once.
 */
export async function transitionPairing(
  db: Db,
  id: number,
  from: PairingStatus,
  to: PairingStatus,
  fields: {
    userId?: number;
    deviceId?: number;
    tokenIssuedAt?: number;
    approvedVia?: ApprovedVia;
    approverName?: string;
    expiresAt?: Date;
  } = {},
): Promise<boolean> {
  const { expiresAt, ...rest } = fields;
  const result = await db.kysely
    .updateTable('pairings')
    .set({
      ...rest,
      status: to,
      ...(expiresAt === undefined ? {} : { expiresAt: db.date(expiresAt) }),
    })
    .where('id', '=', id)
    .where('status', '=', from)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Approved or offered pairings nobody claimed before they expired (their devices are removed). */
export async function listUnclaimedExpired(db: Db, now: Date): Promise<Pairing[]> {
  const rows = await db.kysely
    .selectFrom('pairings')
    .selectAll()
    .where('status', 'in', ['approved', 'offered'])
    .where('expiresAt', '<=', db.date(now))
    .execute();
  return rows.map(toPairing);
}

/** Deletes pairings that expired before `before` (housekeeping). */
export async function purgePairings(db: Db, before: Date): Promise<number> {
  const result = await db.kysely
    .deleteFrom('pairings')
    .where('expiresAt', '<', db.date(before))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
