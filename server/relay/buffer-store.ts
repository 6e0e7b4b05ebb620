import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { openSyncSqlite } from '../db/sqlite-engine.ts';

/**
 * relay.db's layout, version 2. A routed frame kept for absent devices is stored once in
 * `bufferedFrames` (with the user of its room, for the per-user bound) and referenced by one
 * `bufferedMessages` row per absent device (frame ids grow, so they give the delivery order). Version 1 (before
 * the bounds) stored the frame in every `bufferedMessages` row; `openBufferStore` migrates it.
 */
const schemaVersion = 2;

const schema = `
CREATE TABLE IF NOT EXISTS roomDevices (
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('present', 'absent', 'expired')),
  since INTEGER NOT NULL,
  gap INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (room, device)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bufferedFrames (
  id INTEGER PRIMARY KEY,
  user TEXT NOT NULL,
  frame TEXT NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS bufferedFramesByUser ON bufferedFrames (user, id);
CREATE TABLE IF NOT EXISTS bufferedMessages (
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  frame INTEGER NOT NULL,
  PRIMARY KEY (room, device, frame)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bufferedMessagesByFrame ON bufferedMessages (frame);
CREATE TABLE IF NOT EXISTS revokedDevices (
  device TEXT PRIMARY KEY,
  revokedAt INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bufferProbe (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  at INTEGER NOT NULL
);
`;

/**
 * The user of a room: the part of its id before the first dot (room ids are
 * `<userId>.<random>.<signature>`, see `parseRoomId`); a room id without a dot (only with
 * validation off) is its own user. The migration computes the same in SQL.
 */
export function userOfRoom(room: string): string {
  const dot = room.indexOf('.');
  return dot > 0 ? room.slice(0, dot) : room;
}

const userOfRoomSql =
  "CASE WHEN instr(room, '.') > 1 THEN substr(room, 1, instr(room, '.') - 1) ELSE room END";

/** The WAL file is cut back to this size at each checkpoint. */
const journalSizeLimitBytes = 4 * 1024 * 1024;

const scalar = (db: BetterSqlite3.Database, sql: string): unknown => {
  const row = db.prepare(sql).get() as Record<string, unknown> | undefined;
  return row === undefined ? undefined : Object.values(row)[0];
};

function hasColumn(db: BetterSqlite3.Database, table: string, column: string): boolean {
  return db
    .prepare<[], { name: string }>(`PRAGMA table_info(${table})`)
    .all()
    .some((row) => row.name === column);
}

/** Version 1 → 2: each stored frame becomes one frame row and one reference, in the same order. */
function migrateFromVersion1(db: BetterSqlite3.Database): number {
  return db.transaction(() => {
    db.exec(`
      DROP INDEX IF EXISTS bufferedMessagesByDevice;
      ALTER TABLE bufferedMessages RENAME TO bufferedMessagesVersion1;
    `);
    db.exec(schema);
    db.exec(`
      INSERT INTO bufferedFrames (id, user, frame, bytes)
        SELECT id, ${userOfRoomSql}, frame, bytes FROM bufferedMessagesVersion1;
      INSERT INTO bufferedMessages (room, device, frame)
        SELECT room, device, id FROM bufferedMessagesVersion1;
      DROP TABLE bufferedMessagesVersion1;
    `);
    const moved = Number(scalar(db, 'SELECT count(*) FROM bufferedMessages'));
    db.exec(`PRAGMA user_version = ${schemaVersion}`);
    return moved;
  })();
}

export interface BufferStoreNotes {
  /** Frames of a version-1 file carried over, when there was one. */
  migrated?: number;
  /** The one-time VACUUM that turned on incremental vacuum failed (the file keeps its size). */
  vacuumFailed?: unknown;
}

/**
 * Opens (and creates or migrates) relay.db: WAL with `synchronous=NORMAL`, the WAL cut back to
 * 4 MiB at each checkpoint, and `auto_vacuum=INCREMENTAL` so that freed pages can be handed back
 * to the file system (`reclaimSpace`); a file made without it is vacuumed once.
 */
export function openBufferStore(path: string): {
  db: BetterSqlite3.Database;
  notes: BufferStoreNotes;
} {
  mkdirSync(dirname(path), { recursive: true });
  // better-sqlite3, or sql.js when its addon cannot load here (chosen at start).
  const db = openSyncSqlite(path);
  const notes: BufferStoreNotes = {};
  // Takes effect at once on a new, empty file; an existing one needs the VACUUM below.
  db.exec('PRAGMA auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: a commit survives a process crash (kill -9); only a power loss can lose the
  // last commits. No fsync per transaction.
  db.pragma('synchronous = NORMAL');
  db.pragma(`journal_size_limit = ${journalSizeLimitBytes}`);
  const version = Number(scalar(db, 'PRAGMA user_version'));
  if (version < schemaVersion && hasColumn(db, 'bufferedMessages', 'frame')) {
    notes.migrated = migrateFromVersion1(db);
  } else {
    db.exec(schema);
    if (version < schemaVersion) db.exec(`PRAGMA user_version = ${schemaVersion}`);
  }
  if (Number(scalar(db, 'PRAGMA auto_vacuum')) !== 2) {
    try {
      db.exec('VACUUM');
    } catch (err: unknown) {
      notes.vacuumFailed = err;
    }
  }
  return { db, notes };
}

/**
 * Hands the pages freed by deletions back to the file system: incremental vacuum, then a
 * checkpoint that truncates the WAL.
 */
export function reclaimSpace(db: BetterSqlite3.Database): void {
  db.exec('PRAGMA incremental_vacuum');
  db.pragma('wal_checkpoint(TRUNCATE)');
}
