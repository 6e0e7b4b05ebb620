import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { openSyncSqlite } from '../db/sqlite-engine.ts';
import { reclaimSpace } from '../sqlite-space.ts';

/**
 * relay.db's layout, version 3. A routed frame kept for absent devices is stored once in
 * `bufferedFrames` and referenced by one `bufferedMessages` row per absent device (frame ids
 * grow, so they give the delivery order). A reference names its device by a small integer, the
 * id of the device's row in `bufferedDevices` (room and device), so that the references, the
 * rows written most, stay a few bytes each. The frame row carries the user of its room (for the
 * per-user bound), `refs`, the number of references still pointing at it (the frame goes when it
 * reaches 0), and `devices`, the `bufferedDevices` ids it was stored for (a JSON array), through
 * which a bound drops it for each of them without an index by frame. Its text comes last: it can
 * span overflow pages, which reading the other columns then skips.
 *
 * Earlier layouts, migrated by `openBufferStore`: version 1 (before the bounds; `user_version`
 * 0) stored the frame in every `bufferedMessages` row; version 2 keyed each reference by room and
 * device and found a frame's references through an index by frame.
 */
const schemaVersion = 3;

const schema = `
CREATE TABLE IF NOT EXISTS roomDevices (
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('present', 'absent', 'expired')),
  since INTEGER NOT NULL,
  gap INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (room, device)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bufferedDevices (
  id INTEGER PRIMARY KEY,
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  UNIQUE (room, device)
);
CREATE TABLE IF NOT EXISTS bufferedFrames (
  id INTEGER PRIMARY KEY,
  user TEXT NOT NULL,
  refs INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  devices TEXT NOT NULL,
  frame TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS bufferedFramesByUser ON bufferedFrames (user, id);
CREATE TABLE IF NOT EXISTS bufferedMessages (
  device INTEGER NOT NULL,
  frame INTEGER NOT NULL,
  PRIMARY KEY (device, frame)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS revokedDevices (
  device TEXT PRIMARY KEY,
  revokedAt INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bufferProbe (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  at INTEGER NOT NULL
);
`;

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

/**
 * Version 1 or 2 → 3, from `old` (the previous `bufferedMessages`, renamed; one row per device and
 * frame with `room`, `device` and the frame id `id`) and `frames` (id, user, bytes, frame): each
 * device gets its `bufferedDevices` row, each reference its id, each frame its count and list of
 * devices; a frame nothing refers to is not carried over.
 */
function copyIntoVersion3(db: BetterSqlite3.Database, old: string, frames: string): void {
  db.exec(`
    INSERT INTO bufferedDevices (room, device) SELECT DISTINCT room, device FROM ${old};
    INSERT INTO bufferedMessages (device, frame)
      SELECT d.id, o.id FROM ${old} o JOIN bufferedDevices d ON d.room = o.room AND d.device = o.device;
    INSERT INTO bufferedFrames (id, user, refs, bytes, devices, frame)
      SELECT f.id, f.user, r.refs, f.bytes, r.devices, f.frame FROM ${frames} f
      JOIN (SELECT frame, count(*) AS refs, json_group_array(device) AS devices
            FROM bufferedMessages GROUP BY frame) r ON r.frame = f.id;
  `);
}

/** Version 1 → 3: each stored frame becomes one frame row and one reference, in the same order. */
function migrateFromVersion1(db: BetterSqlite3.Database): void {
  db.exec(`
    DROP INDEX IF EXISTS bufferedMessagesByDevice;
    ALTER TABLE bufferedMessages RENAME TO bufferedMessagesVersion1;
  `);
  db.exec(schema);
  copyIntoVersion3(
    db,
    'bufferedMessagesVersion1',
    `(SELECT id, ${userOfRoomSql} AS user, bytes, frame FROM bufferedMessagesVersion1)`,
  );
  db.exec('DROP TABLE bufferedMessagesVersion1');
}

/** Version 2 → 3: the same frames and references, keyed and counted as version 3 does. */
function migrateFromVersion2(db: BetterSqlite3.Database): void {
  db.exec(`
    DROP INDEX IF EXISTS bufferedFramesByUser;
    DROP INDEX IF EXISTS bufferedMessagesByFrame;
    ALTER TABLE bufferedFrames RENAME TO bufferedFramesVersion2;
    ALTER TABLE bufferedMessages RENAME TO bufferedMessagesVersion2;
  `);
  db.exec(schema);
  copyIntoVersion3(
    db,
    '(SELECT room, device, frame AS id FROM bufferedMessagesVersion2)',
    'bufferedFramesVersion2',
  );
  db.exec('DROP TABLE bufferedFramesVersion2; DROP TABLE bufferedMessagesVersion2;');
}

/** Brings a file of an earlier layout to the current one, in one transaction. */
function migrate(db: BetterSqlite3.Database, from: 1 | 2): number {
  return db.transaction(() => {
    if (from === 1) migrateFromVersion1(db);
    else migrateFromVersion2(db);
    db.exec(`PRAGMA user_version = ${schemaVersion}`);
    return Number(scalar(db, 'SELECT count(*) FROM bufferedMessages'));
  })();
}

export interface BufferStoreNotes {
  /** A file of an earlier layout was migrated: its version, and the references carried over. */
  migrated?: { fromVersion: 1 | 2; references: number };
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
  const version = Number(scalar(db, 'PRAGMA user_version'));
  if (version > schemaVersion) {
    db.close();
    throw new Error(
      `${path} has layout ${version}, newer than this relay's (${schemaVersion}): it was written by a newer sync-host; run that one, or move the file aside (what it holds is then lost)`,
    );
  }
  const notes: BufferStoreNotes = {};
  // Takes effect at once on a new, empty file; an existing one needs the VACUUM below.
  db.exec('PRAGMA auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: a commit survives a process crash (kill -9); only a power loss can lose the
  // last commits. No fsync per transaction.
  db.pragma('synchronous = NORMAL');
  db.pragma(`journal_size_limit = ${journalSizeLimitBytes}`);
  const from =
    version === 2 ? 2 : version < 2 && hasColumn(db, 'bufferedMessages', 'frame') ? 1 : 0;
  if (from !== 0) {
    notes.migrated = { fromVersion: from, references: migrate(db, from) };
  } else {
    db.exec(schema);
    if (version < schemaVersion) db.exec(`PRAGMA user_version = ${schemaVersion}`);
  }
  if (Number(scalar(db, 'PRAGMA auto_vacuum')) === 2) {
    // The tables of the old layout, dropped by the migration, give their pages back.
    if (from !== 0) reclaimSpace(db);
  } else {
    try {
      db.exec('VACUUM');
    } catch (err: unknown) {
      notes.vacuumFailed = err;
    }
  }
  return { db, notes };
}
