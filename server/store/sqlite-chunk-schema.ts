import type BetterSqlite3 from 'better-sqlite3';
import type { FolderReport } from './chunk-store.ts';

/**
 * store.db's chunk tables (layout 2; layout 1 had none, they are added at open). `chunks`: one
 * row per (room, kc, id), `kc` `''` when not encrypted, with the user of its room, the bytes it
 * counts against the bounds, its bytes as sent, when it was stored and last used (the sweep drops
 * chunks unused for longer than the history window). `folderReports`: the latest count each
 * folder document's devices sent.
 *
 * A chunk's bytes are in a file beside store.db (`ChunkFiles`), numbered by the row's `file`
 * column (added at open by `fileColumn`); its `data` is then empty (chunks never are). SQLite
 * committed 256 KiB rows seven times slower than the same bytes written to files (`npx tsx
 * bench/chunk-host.ts`). Rows written before that column hold their bytes in `data`, and are
 * read from there; they are not moved.
 *
 * `chunks` is a rowid table: rows that hold 256 KiB are written and read about twice as fast in
 * a rowid table as in a WITHOUT ROWID one. The first files of layout 2 made it WITHOUT ROWID;
 * `rowidChunks` rebuilds theirs at open.
 */
export const chunkSchema = `
CREATE TABLE IF NOT EXISTS chunks (
  room TEXT NOT NULL,
  kc TEXT NOT NULL,
  id TEXT NOT NULL,
  user TEXT NOT NULL,
  size INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  storedAt INTEGER NOT NULL,
  usedAt INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (room, kc, id)
);
CREATE INDEX IF NOT EXISTS chunksByUser ON chunks (user);
CREATE INDEX IF NOT EXISTS chunksByUse ON chunks (usedAt);
CREATE TABLE IF NOT EXISTS folderReports (
  room TEXT NOT NULL,
  doc TEXT NOT NULL,
  user TEXT NOT NULL,
  device TEXT NOT NULL,
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  encrypted INTEGER NOT NULL,
  names TEXT,
  at INTEGER NOT NULL,
  PRIMARY KEY (room, doc)
);
`;

/**
 * Rebuilds a WITHOUT ROWID `chunks` table (the first files of layout 2) as the rowid table of
 * `chunkSchema` (with `file`), keeping every row, in one transaction; does nothing to a rowid one.
 */
export function rowidChunks(db: BetterSqlite3.Database): void {
  const sql = db
    .prepare<[], string>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks'")
    .pluck()
    .get();
  if (sql === undefined || !/WITHOUT\s+ROWID/i.test(sql)) return;
  db.transaction(() => {
    db.exec('ALTER TABLE chunks RENAME TO chunksWithoutRowid');
    db.exec('DROP INDEX IF EXISTS chunksByUser');
    db.exec('DROP INDEX IF EXISTS chunksByUse');
    db.exec(chunkSchema);
    fileColumn(db);
    // Named: the old table has `file` only if a version with chunk files made it.
    const columns = db
      .prepare<[], string>(
        "SELECT name FROM pragma_table_info('chunks') WHERE name IN (SELECT name FROM pragma_table_info('chunksWithoutRowid'))",
      )
      .pluck()
      .all()
      .join(', ');
    db.exec(`INSERT INTO chunks (${columns}) SELECT ${columns} FROM chunksWithoutRowid`);
    db.exec('DROP TABLE chunksWithoutRowid');
  })();
}

/**
 * Adds `chunks.file` (the number of the file holding the chunk's bytes, NULL for a row that
 * holds them in `data`) when missing, and its index: the numbers are read at open (the highest,
 * and those the rows name) from the index alone, not the rows.
 */
export function fileColumn(db: BetterSqlite3.Database): void {
  const has = db
    .prepare<[], number>("SELECT count(*) FROM pragma_table_info('chunks') WHERE name = 'file'")
    .pluck()
    .get();
  if (has === 0) db.exec('ALTER TABLE chunks ADD COLUMN file INTEGER');
  db.exec('CREATE INDEX IF NOT EXISTS chunksByFile ON chunks (file)');
}

export interface ReportRow {
  room: string;
  doc: string;
  device: string;
  files: number;
  bytes: number;
  encrypted: number;
  names: string | null;
  at: number;
}

export function reportOfRow(row: ReportRow): FolderReport {
  return {
    room: row.room,
    doc: row.doc,
    device: row.device,
    files: row.files,
    bytes: row.bytes,
    encrypted: row.encrypted === 1,
    ...(row.names === null ? {} : { names: JSON.parse(row.names) as string[] }),
    at: row.at,
  };
}

/** A chunk's row but its bytes. */
export interface ChunkPlace {
  user: string;
  size: number;
  bytes: number;
  /** The number of the file holding the bytes; null when `data` holds them. */
  file: number | null;
}

export interface ChunkRow extends ChunkPlace {
  data: Buffer | Uint8Array;
}

/** The bytes a row holds itself (rows written before the chunk files). */
export const ownBytes = (row: ChunkRow): Buffer =>
  Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data);

/** The statements the chunk store runs most, prepared once. */
export function chunkStatements(db: BetterSqlite3.Database) {
  return {
    touch: db.prepare<[number, string, string, string]>(
      'UPDATE chunks SET usedAt = ? WHERE room = ? AND kc = ? AND id = ?',
    ),
    insert: db.prepare(
      "INSERT INTO chunks (room, kc, id, user, size, bytes, storedAt, usedAt, data, file) VALUES (?, ?, ?, ?, ?, ?, ?, ?, x'', ?)",
    ),
    row: db.prepare<[string, string, string], ChunkRow>(
      'SELECT user, size, bytes, file, data FROM chunks WHERE room = ? AND kc = ? AND id = ?',
    ),
    place: db.prepare<[string, string, string], ChunkPlace>(
      'SELECT user, size, bytes, file FROM chunks WHERE room = ? AND kc = ? AND id = ?',
    ),
    delete: db.prepare<[string, string, string]>(
      'DELETE FROM chunks WHERE room = ? AND kc = ? AND id = ?',
    ),
    report: db.prepare(
      'INSERT OR REPLACE INTO folderReports (room, doc, user, device, files, bytes, encrypted, names, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
  };
}
