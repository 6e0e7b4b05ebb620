import { type Kysely, sql } from 'kysely';

/**
 * The cluster store's tables in PostgreSQL, version 1 (`store_version`). The operator creates
 * the database and a role that may create tables in it; the first node to start creates the
 * tables (under an advisory lock, so that nodes starting together do not race).
 *
 * `store_users` counts each user's bytes: a user's row is locked by every transaction that
 * changes them, so the user bound holds across nodes. `store_documents` has one row per (room,
 * document key) with its last position (a transactional counter: an append takes the row's lock,
 * so positions 1, 2, 3 ... are given in commit order and never twice) and its bytes;
 * `store_entries` the entries, their bytes as `bytea` (what the device sent: ciphertext when the
 * project is encrypted). Names begin with `store_` so that the tables may share a database with
 * the auth tables. Version 2 adds `store_chunks` (the files' chunks, keyed by room, key check
 * value (`''`: not encrypted) and id, counted in `store_users` like entries) and
 * `store_folder_reports` (each folder document's latest count of files, with the bytes it counts
 * in `store_users`). Version 3 counts each folder report against its user (`counted`; reports
 * kept before are dropped once, their devices send them again) and indexes the key checks. A
 * node of an older version refuses a database at a newer layout rather than write reports it
 * does not count.
 */
export const storeSchemaVersion = 3;

const tables = [
  'CREATE TABLE IF NOT EXISTS store_version (version integer NOT NULL)',
  `CREATE TABLE IF NOT EXISTS store_users (
    user_id text PRIMARY KEY,
    bytes bigint NOT NULL DEFAULT 0
  )`,
  `CREATE TABLE IF NOT EXISTS store_documents (
    id bigserial PRIMARY KEY,
    room text NOT NULL,
    doc text NOT NULL,
    user_id text NOT NULL,
    last_pos bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    UNIQUE (room, doc)
  )`,
  'CREATE INDEX IF NOT EXISTS store_documents_user ON store_documents (user_id)',
  `CREATE TABLE IF NOT EXISTS store_entries (
    id bigserial PRIMARY KEY,
    document bigint NOT NULL REFERENCES store_documents (id) ON DELETE CASCADE,
    pos bigint NOT NULL,
    at bigint NOT NULL,
    device text NOT NULL,
    kc text,
    covers bigint,
    part jsonb,
    keep boolean NOT NULL DEFAULT false,
    bytes bigint NOT NULL,
    data bytea NOT NULL,
    UNIQUE (document, pos)
  )`,
  `CREATE INDEX IF NOT EXISTS store_entries_snapshots ON store_entries (document, kc, pos)
    WHERE covers IS NOT NULL`,
  // A room's key check values, found without reading its entries (`keyChecks`).
  `CREATE INDEX IF NOT EXISTS store_entries_keys ON store_entries (document, kc)
    WHERE kc IS NOT NULL`,
  `CREATE TABLE IF NOT EXISTS store_chunks (
    room text NOT NULL,
    kc text NOT NULL,
    id text NOT NULL,
    user_id text NOT NULL,
    size bigint NOT NULL,
    bytes bigint NOT NULL,
    stored_at bigint NOT NULL,
    used_at bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (room, kc, id)
  )`,
  'CREATE INDEX IF NOT EXISTS store_chunks_user ON store_chunks (user_id)',
  'CREATE INDEX IF NOT EXISTS store_chunks_use ON store_chunks (used_at)',
  `CREATE TABLE IF NOT EXISTS store_folder_reports (
    room text NOT NULL,
    doc text NOT NULL,
    user_id text NOT NULL,
    device text NOT NULL,
    files bigint NOT NULL,
    bytes bigint NOT NULL,
    encrypted boolean NOT NULL,
    names jsonb,
    at bigint NOT NULL,
    PRIMARY KEY (room, doc)
  )`,
  // What a report counts against the bounds (`reportBytes`, in `store_users` like entries). The
  // reports kept before it was counted are dropped once: their devices report again.
  'ALTER TABLE store_folder_reports ADD COLUMN IF NOT EXISTS counted bigint',
  'DELETE FROM store_folder_reports WHERE counted IS NULL',
  'CREATE INDEX IF NOT EXISTS store_folder_reports_user ON store_folder_reports (user_id)',
];

/** Advisory lock keys (any constants; the same on every node). */
export const schemaLockKey = 0x5359_4e01;
export const compactionLockKey = 0x5359_4e02;

/** The tables the store's queries name, as Kysely sees them. */
export interface StoreTables {
  store_entries: {
    document: number;
    pos: number;
    at: number;
    device: string;
    kc: string | null;
    covers: number | null;
    part: string | null;
    keep: boolean;
    bytes: number;
    data: Buffer;
  };
}

/**
 * Creates the tables when absent; rejects when the database holds a newer layout (written by a
 * newer sync-host) and leaves it untouched.
 */
export async function ensureStoreSchema(db: Kysely<StoreTables>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${schemaLockKey})`.execute(trx);
    for (const statement of tables) await sql.raw(statement).execute(trx);
    const found = await sql<{ version: number }>`SELECT version FROM store_version`.execute(trx);
    const version = found.rows[0]?.version;
    if (version === undefined) {
      await sql`INSERT INTO store_version (version) VALUES (${storeSchemaVersion})`.execute(trx);
    } else if (version < storeSchemaVersion) {
      // The tables above were added (IF NOT EXISTS): the layout is the current one now.
      await sql`UPDATE store_version SET version = ${storeSchemaVersion}`.execute(trx);
    } else if (version > storeSchemaVersion) {
      throw new Error(
        `the document store's tables have layout ${version}, newer than this relay's (${storeSchemaVersion}): they were written by a newer sync-host; run that one`,
      );
    }
  });
}
