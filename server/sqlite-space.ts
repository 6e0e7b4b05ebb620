import type BetterSqlite3 from 'better-sqlite3';

/**
 * Hands the pages freed by deletions back to the file system: incremental vacuum, then a
 * checkpoint that truncates the WAL.
 */
export function reclaimSpace(db: BetterSqlite3.Database): void {
  db.exec('PRAGMA incremental_vacuum');
  db.pragma('wal_checkpoint(TRUNCATE)');
}
