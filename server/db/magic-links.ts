import { sha256Hex } from '../hashing.ts';
import type { Db } from './connect.ts';
import { toIso } from './schema.ts';

export interface MagicLink {
  id: number;
  email: string;
  expiresAt: string;
  used: boolean;
}

/** Stores a link by the digest of its token. */
export async function createMagicLink(
  db: Db,
  email: string,
  token: string,
  now: Date,
  expiresAt: Date,
): Promise<void> {
  await db.kysely
    .insertInto('magic_links')
    .values({
      email,
      token: sha256Hex(token),
      expiresAt: db.date(expiresAt),
      used: db.bool(false),
      createdAt: db.date(now),
    })
    .execute();
}

export async function findMagicLink(db: Db, token: string): Promise<MagicLink | undefined> {
  const row = await db.kysely
    .selectFrom('magic_links')
    .select(['id', 'email', 'expiresAt', 'used'])
    .where('token', '=', sha256Hex(token))
    .executeTakeFirst();
  return (
    row && {
      id: Number(row.id),
      email: row.email,
      expiresAt: toIso(row.expiresAt),
      used: Boolean(Number(row.used)),
    }
  );
}

/**
 * Marks a link used if it still is unused. Of concurrent callers exactly one gets true: the
 * conditional UPDATE is atomic on every driver.
 */
export async function consumeMagicLink(db: Db, id: number): Promise<boolean> {
  const result = await db.kysely
    .updateTable('magic_links')
    .set({ used: db.bool(true) })
    .where('id', '=', id)
    .where('used', '=', db.bool(false))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Makes a consumed link usable again: the verify that consumed it failed before finishing. */
export async function releaseMagicLink(db: Db, id: number): Promise<void> {
  await db.kysely
    .updateTable('magic_links')
    .set({ used: db.bool(false) })
    .where('id', '=', id)
    .execute();
}

/** Removes links that expired before `before` (housekeeping). */
export async function purgeMagicLinks(db: Db, before: Date): Promise<number> {
  const result = await db.kysely
    .deleteFrom('magic_links')
    .where('expiresAt', '<', db.date(before))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
