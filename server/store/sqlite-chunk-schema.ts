import type BetterSqlite3 from 'better-sqlite3';

/**
 * store.db's chunk tables (layout 2; layout 1 had none, they are added at open). `chunks`: one
 * row per (room, kc, id), `kc` `''` when not encrypted, with the user of its room, the bytes it
 * counts against the bounds, its bytes as sent, when it was stored and last used (the sweep drops
 * chunks unused for longer than the history window). `folderReports`: the latest count each
 * folder document's devices sent, with what it counts against the bounds (`counted`, added at
 * open by `reportColumn`).
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
  counted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (room, doc)
);
CREATE INDEX IF NOT EXISTS folderReportsByUser ON folderReports (user);
`;

/**
 * Adds `folderReports.counted` (the bytes a report counts against the bounds, `reportBytes`)
 * when missing, counted for the rows already there from their stored names and keys (the names'
 * JSON is kept as it was sent, so its bytes are those `reportBytes` counts).
 */
export function reportColumn(db: BetterSqlite3.Database): void {
  const has = db
    .prepare<[], number>(
      "SELECT count(*) FROM pragma_table_info('folderReports') WHERE name = 'counted'",
    )
    .pluck()
    .get();
  if (has !== 0) return;
  db.transaction(() => {
    db.exec('ALTER TABLE folderReports ADD COLUMN counted INTEGER NOT NULL DEFAULT 0');
    db.exec(`UPDATE folderReports SET counted = 64 + length(CAST(doc AS BLOB))
      + length(CAST(device AS BLOB)) + coalesce(length(CAST(names AS BLOB)), 0)`);
  })();
}

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
