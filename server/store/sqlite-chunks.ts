import type BetterSqlite3 from 'better-sqlite3';
import { userOfRoom } from '../relay/buffer-store.ts';
import {
  type ChunkStore,
  chunkBytes,
  type FolderReport,
  type NewChunk,
  type PutOutcome,
  type RoomChunks,
  roomChunksOf,
} from './chunk-store.ts';
import type { StoreBounds } from './document-store.ts';

/**
 * store.db's chunk tables (layout 2; layout 1 had none, they are added at open). `chunks`: one
 * row per (room, kc, id), `kc` `''` when not encrypted, with the user of its room, the bytes it
 * counts against the bounds, its bytes as sent, when it was stored and last used (the sweep drops
 * chunks unused for longer than the history window). `folderReports`: the latest count each
 * folder document's devices sent.
 *
 * `chunks` is a rowid table: its rows hold up to 256 KiB each, and SQLite writes and reads such
 * rows about twice as fast in a rowid table as in a WITHOUT ROWID one (`npx tsx
 * bench/chunk-host.ts`). The first files of layout 2 made it WITHOUT ROWID; `rowidChunks`
 * rebuilds theirs at open. Both forms have the same columns, so either version of sync-host reads
 * either.
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
 * `chunkSchema`, keeping every row, in one transaction; does nothing to a rowid one.
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
    db.exec('INSERT INTO chunks SELECT * FROM chunksWithoutRowid');
    db.exec('DROP TABLE chunksWithoutRowid');
  })();
}

/** The bytes counted against the bounds, per user and in all (shared by documents and chunks). */
export interface ByteCounts {
  total: number;
  users: Map<string, number>;
}

/** Counts the bytes of store.db's documents and chunks, per user. */
export function countBytes(db: BetterSqlite3.Database, counts: ByteCounts): void {
  counts.users.clear();
  counts.total = 0;
  const rows = db
    .prepare<[], { user: string; bytes: number }>(
      `SELECT user, sum(bytes) AS bytes FROM (
        SELECT user, bytes FROM documents UNION ALL SELECT user, bytes FROM chunks
      ) GROUP BY user`,
    )
    .all();
  for (const row of rows) {
    counts.users.set(row.user, row.bytes);
    counts.total += row.bytes;
  }
}

interface Queued {
  chunk: NewChunk;
  resolve: (outcome: PutOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * The single-node chunk store in store.db (see `ChunkStore`). Puts wait until the end of the
 * event-loop turn and are committed together, each resolving after that commit; reads first
 * commit what is queued, so a chunk put before a `chunk-get` is found by it.
 */
export class SqliteChunkStore implements ChunkStore {
  readonly #db: BetterSqlite3.Database;
  readonly #bounds: StoreBounds;
  readonly #counts: ByteCounts;
  readonly #now: () => number;
  #queue: Queued[] = [];
  #flushScheduled = false;
  #bytes = 0;
  readonly #statements;

  constructor(
    db: BetterSqlite3.Database,
    bounds: StoreBounds,
    counts: ByteCounts,
    now: () => number,
  ) {
    this.#db = db;
    this.#bounds = bounds;
    this.#counts = counts;
    this.#now = now;
    rowidChunks(db);
    this.#statements = {
      touch: db.prepare<[number, string, string, string]>(
        'UPDATE chunks SET usedAt = ? WHERE room = ? AND kc = ? AND id = ?',
      ),
      insert: db.prepare(
        'INSERT INTO chunks (room, kc, id, user, size, bytes, storedAt, usedAt, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      get: db.prepare<[string, string, string], { data: Buffer | Uint8Array }>(
        'SELECT data FROM chunks WHERE room = ? AND kc = ? AND id = ?',
      ),
      row: db.prepare<[string, string, string], ChunkRow>(
        'SELECT user, bytes, data FROM chunks WHERE room = ? AND kc = ? AND id = ?',
      ),
      delete: db.prepare<[string, string, string]>(
        'DELETE FROM chunks WHERE room = ? AND kc = ? AND id = ?',
      ),
      report: db.prepare(
        'INSERT OR REPLACE INTO folderReports (room, doc, user, device, files, bytes, encrypted, names, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
    };
    this.#recount();
  }

  #recount(): void {
    const sum = this.#db.prepare<[], number | null>('SELECT sum(bytes) FROM chunks').pluck().get();
    this.#bytes = sum ?? 0;
  }

  bytes(): number {
    return this.#bytes;
  }

  put(chunk: NewChunk): Promise<PutOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ chunk, resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => this.flush());
    });
  }

  /** Commits every queued put in one transaction, then settles them in order. */
  flush(): void {
    this.#flushScheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    const counted = { total: this.#counts.total, users: new Map(this.#counts.users) };
    let outcomes: PutOutcome[];
    try {
      outcomes = this.#db.transaction(() => queue.map((q) => this.#insert(q.chunk, counted)))();
    } catch (err: unknown) {
      this.#recount();
      for (const q of queue) q.reject(err);
      return;
    }
    this.#counts.total = counted.total;
    for (const [user, bytes] of counted.users) this.#counts.users.set(user, bytes);
    queue.forEach((q, i) => {
      q.resolve(outcomes[i] as PutOutcome);
    });
  }

  #insert(chunk: NewChunk, counted: ByteCounts): PutOutcome {
    const at = this.#now();
    if (this.#statements.touch.run(at, chunk.room, chunk.kc, chunk.id).changes > 0) {
      return { stored: true, already: true };
    }
    const user = userOfRoom(chunk.room);
    const bytes = chunkBytes(chunk);
    const userBytes = counted.users.get(user) ?? 0;
    if (userBytes + bytes > this.#bounds.userMaxBytes) return { full: 'user' };
    if (counted.total + bytes > this.#bounds.maxBytes) return { full: 'store' };
    const { room, kc, id, data } = chunk;
    this.#statements.insert.run(room, kc, id, user, data.length, bytes, at, at, data);
    counted.users.set(user, userBytes + bytes);
    counted.total += bytes;
    this.#bytes += bytes;
    return { stored: true, already: false };
  }

  async have(room: string, kc: string, ids: readonly string[]): Promise<string[]> {
    this.flush();
    const at = this.#now();
    const touch = this.#statements.touch;
    return this.#db.transaction(() =>
      ids.filter((id) => touch.run(at, room, kc, id).changes > 0),
    )();
  }

  async get(room: string, kc: string, id: string): Promise<Buffer | undefined> {
    this.flush();
    const row = this.#statements.get.get(room, kc, id);
    if (row === undefined) return undefined;
    return Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data);
  }

  async drop(room: string, kc: string, id: string, only?: Buffer): Promise<boolean> {
    this.flush();
    const { row, delete: remove } = this.#statements;
    // Read and deleted in one transaction: a copy put again meanwhile is never the one dropped.
    const dropped = this.#db.transaction(() => {
      const found = row.get(room, kc, id);
      if (found === undefined) return undefined;
      if (only !== undefined && !only.equals(found.data)) return undefined;
      remove.run(room, kc, id);
      return found;
    })();
    if (dropped === undefined) return false;
    const users = this.#counts.users;
    users.set(dropped.user, (users.get(dropped.user) ?? 0) - dropped.bytes);
    this.#counts.total -= dropped.bytes;
    this.#bytes -= dropped.bytes;
    return true;
  }

  async report(report: FolderReport): Promise<void> {
    const names = report.encrypted || report.names === undefined ? null : report.names;
    this.#statements.report.run(
      report.room,
      report.doc,
      userOfRoom(report.room),
      report.device,
      report.files,
      report.bytes,
      report.encrypted ? 1 : 0,
      names === null ? null : JSON.stringify(names),
      report.at,
    );
  }

  /** Deletes the chunks and reports matching `where` (on `user` or `room`); returns bytes per user. */
  delete(where: 'room' | 'user', value: string): Map<string, number> {
    this.flush();
    const freed = new Map<string, number>();
    const rows = this.#db
      .prepare<[string], { user: string; bytes: number }>(
        `SELECT user, sum(bytes) AS bytes FROM chunks WHERE ${where} = ? GROUP BY user`,
      )
      .all(value);
    for (const row of rows) freed.set(row.user, row.bytes);
    this.#db.prepare(`DELETE FROM chunks WHERE ${where} = ?`).run(value);
    this.#db.prepare(`DELETE FROM folderReports WHERE ${where} = ?`).run(value);
    this.#recount();
    return freed;
  }

  /** Drops the chunks last used before `before` (ms); returns how many. */
  dropUnused(before: number): number {
    this.flush();
    const dropped = this.#db.prepare('DELETE FROM chunks WHERE usedAt < ?').run(before).changes;
    if (dropped > 0) this.#recount();
    return dropped;
  }

  /** Rooms that hold chunks or folder reports. */
  rooms(): string[] {
    return this.#db
      .prepare<[], string>('SELECT room FROM chunks UNION SELECT room FROM folderReports')
      .pluck()
      .all();
  }

  /** Chunks and folder reports per room. */
  usage(): Map<string, RoomChunks & { user: string }> {
    const counts = this.#db
      .prepare<[], { room: string; chunks: number; bytes: number }>(
        'SELECT room, count(*) AS chunks, sum(bytes) AS bytes FROM chunks GROUP BY room',
      )
      .all();
    const reports = this.#db.prepare<[], ReportRow>('SELECT * FROM folderReports').all();
    return roomChunksOf(counts, reports.map(reportOfRow));
  }
}

interface ChunkRow {
  user: string;
  bytes: number;
  data: Buffer | Uint8Array;
}

interface ReportRow {
  room: string;
  doc: string;
  device: string;
  files: number;
  bytes: number;
  encrypted: number;
  names: string | null;
  at: number;
}

function reportOfRow(row: ReportRow): FolderReport {
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
