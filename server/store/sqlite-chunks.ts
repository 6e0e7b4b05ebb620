import type BetterSqlite3 from 'better-sqlite3';
import { maxReportBytes, maxReportsPerRoom, reportBytes } from '../../protocol/relay-frames.ts';
import { userOfRoom } from '../../protocol/room-id.ts';
import { type ByteCounts, boundPassed, type CountBatch } from './byte-counts.ts';
import { ChunkFiles } from './chunk-files.ts';
import {
  type ChunkStore,
  chunkBytes,
  type FolderReport,
  type NewChunk,
  type PutOutcome,
  type ReportOutcome,
  type ReportSummary,
  type RoomChunks,
  roomChunksOf,
} from './chunk-store.ts';
import type { StoreBounds } from './document-store.ts';
import { fileColumn, rowidChunks } from './sqlite-chunk-schema.ts';

interface Writing {
  chunk: NewChunk;
  /** Set by a `delete` of its room or user: the put is refused once the file is written. */
  deleted: boolean;
  written: Promise<number>;
}

interface Queued {
  chunk: NewChunk;
  /** The number of the file its bytes were written to. */
  file: number;
  resolve: (outcome: PutOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * The single-node chunk store in store.db (see `ChunkStore`), the bytes in files beside it
 * (`ChunkFiles`). A put first writes its chunk's file (off the relay's thread), then waits until
 * the end of the event-loop turn, when the rows of every put written are committed together;
 * each resolves after that commit. A file no committed row names (a put refused at the commit,
 * held already, or rolled back) is removed; one left by a crash, at the next open. Reads first
 * commit what is queued, so a chunk put before a `chunk-get` is found by it. A chunk is removed
 * (drop, delete, sweep) by committing its row's deletion, then removing its file; a `delete`
 * also refuses the puts of its room or user whose file is still being written.
 */
export class SqliteChunkStore implements ChunkStore {
  readonly #db: BetterSqlite3.Database;
  readonly #bounds: StoreBounds;
  readonly #counts: ByteCounts;
  readonly #now: () => number;
  readonly #files: ChunkFiles;
  #queue: Queued[] = [];
  /** The puts whose file is being written; a `delete` of their room or user marks them. */
  readonly #writing = new Set<Writing>();
  /** The puts under way by room, key check value and id: a second put of one waits for it. */
  readonly #putting = new Map<string, Promise<PutOutcome>>();
  #closed = false;
  #flushScheduled = false;
  #bytes = 0;
  readonly #statements;

  /** `folder`: where the chunks' files go (`chunks/` beside store.db). */
  constructor(
    db: BetterSqlite3.Database,
    folder: string,
    bounds: StoreBounds,
    counts: ByteCounts,
    now: () => number,
  ) {
    this.#db = db;
    this.#bounds = bounds;
    this.#counts = counts;
    this.#now = now;
    rowidChunks(db);
    fileColumn(db);
    this.#statements = chunkStatements(db);
    this.#recount();
    const named = new Set(
      db.prepare<[], number>('SELECT file FROM chunks WHERE file IS NOT NULL').pluck().iterate(),
    );
    this.#files = new ChunkFiles(folder, named);
  }

  #recount(): void {
    const sum = this.#db.prepare<[], number | null>('SELECT sum(bytes) FROM chunks').pluck().get();
    this.#bytes = sum ?? 0;
  }

  bytes(): number {
    return this.#bytes;
  }

  async put(chunk: NewChunk): Promise<PutOutcome> {
    if (this.#closed) throw new Error('the chunk store is closed');
    const key = `${chunk.room}\n${chunk.kc}\n${chunk.id}`;
    const earlier = this.#putting.get(key);
    if (earlier !== undefined) {
      // The same chunk is being put: that put first, then this one finds it held (or writes it).
      await earlier.catch(() => undefined);
      return this.put(chunk);
    }
    const outcome = this.#put(chunk);
    this.#putting.set(key, outcome);
    try {
      return await outcome;
    } finally {
      this.#putting.delete(key);
    }
  }

  async #put(chunk: NewChunk): Promise<PutOutcome> {
    const early = this.#answerWithoutWriting(chunk);
    if (early !== undefined) return early;
    const written = this.#files.write(chunk.data);
    const writing: Writing = { chunk, deleted: false, written };
    this.#writing.add(writing);
    let file: number;
    try {
      file = await written;
    } finally {
      this.#writing.delete(writing);
    }
    if (writing.deleted) {
      this.#files.remove([file]);
      throw new Error('its room or user was deleted while the chunk was written');
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ chunk, file, resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => this.flush());
    });
  }

  /**
   * The outcome of a put known before its file is written: held already (marked used), or over
   * a bound as the committed counts stand. The commit checks both again.
   */
  #answerWithoutWriting(chunk: NewChunk): PutOutcome | undefined {
    const { room, kc, id } = chunk;
    const found = this.#statements.place.get(room, kc, id);
    if (found !== undefined && this.#intact(found)) {
      this.#statements.touch.run(this.#now(), room, kc, id);
      return { stored: true, already: true };
    }
    return this.#overBound(this.#counts, userOfRoom(room), chunkBytes(chunk));
  }

  #overBound(
    counted: ByteCounts | CountBatch,
    user: string,
    bytes: number,
  ): PutOutcome | undefined {
    const full = boundPassed(counted, this.#bounds, user, bytes);
    return full === undefined ? undefined : { full };
  }

  /**
   * Waits for the puts whose file is being written and commits them with the others queued;
   * puts are refused from then on. The caller closes the database after this.
   */
  async close(): Promise<void> {
    while (this.#writing.size > 0) {
      await Promise.allSettled([...this.#writing].map((writing) => writing.written));
      await new Promise((resolve) => setImmediate(resolve)); // their puts queue themselves
    }
    this.flush();
    this.#closed = true;
  }

  /** Commits every queued put in one transaction, then settles them in order. */
  flush(): void {
    this.#flushScheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    const counted = this.#counts.batch();
    const unused: number[] = [];
    const lost: number[] = [];
    let outcomes: PutOutcome[];
    try {
      outcomes = this.#db.transaction(() =>
        queue.map((q) => this.#insert(q, counted, unused, lost)),
      )();
    } catch (err: unknown) {
      // Rolled back, so no row names this batch's files; unless sql.js kept the commit in memory
      // and only failed to write store.db (`SqliteImageWriteError`): its rows name them then.
      const committed = (err as { committedInMemory?: boolean }).committedInMemory === true;
      this.#files.remove(committed ? unused : queue.map((q) => q.file));
      this.#recount();
      for (const q of queue) q.reject(err);
      return;
    }
    this.#counts.commit(counted);
    this.#files.remove([...lost, ...unused]);
    queue.forEach((q, i) => {
      q.resolve(outcomes[i] as PutOutcome);
    });
  }

  /**
   * Stores one written chunk in the batch's transaction; a copy already held is only marked
   * used, and its new file goes in `unused` (as does a refused put's). A row whose file is gone
   * or cut short is replaced (its file number goes in `lost`): the put brings the bytes back.
   */
  #insert(q: Queued, counted: CountBatch, unused: number[], lost: number[]): PutOutcome {
    const at = this.#now();
    const { room, kc, id, data } = q.chunk;
    const found = this.#statements.place.get(room, kc, id);
    if (found !== undefined) {
      if (this.#intact(found)) {
        this.#statements.touch.run(at, room, kc, id);
        unused.push(q.file);
        return { stored: true, already: true };
      }
      this.#statements.delete.run(room, kc, id);
      lost.push(found.file as number); // not intact, so it names a file
      counted.add(found.user, -found.bytes);
      this.#bytes -= found.bytes;
    }
    const user = userOfRoom(room);
    const bytes = chunkBytes(q.chunk);
    const full = this.#overBound(counted, user, bytes);
    if (full !== undefined) {
      unused.push(q.file);
      return full;
    }
    this.#statements.insert.run(room, kc, id, user, data.length, bytes, at, at, q.file);
    counted.add(user, bytes);
    this.#bytes += bytes;
    return { stored: true, already: false };
  }

  /**
   * The ids of `ids` held, each marked used now. A chunk whose file is gone or cut short (a
   * power loss, a data folder restored without its `chunks/`) is not held: its row goes, so the
   * device that asked puts it again at once.
   */
  async have(room: string, kc: string, ids: readonly string[]): Promise<string[]> {
    this.flush();
    const at = this.#now();
    const { touch, place, delete: remove } = this.#statements;
    const lost: ChunkPlace[] = [];
    const held = this.#db.transaction(() =>
      ids.filter((id) => {
        const found = place.get(room, kc, id);
        if (found === undefined) return false;
        if (!this.#intact(found)) {
          remove.run(room, kc, id);
          lost.push(found);
          return false;
        }
        touch.run(at, room, kc, id);
        return true;
      }),
    )();
    for (const found of lost) this.#forget(found);
    return held;
  }

  async get(room: string, kc: string, id: string): Promise<Buffer | undefined> {
    this.flush();
    const { row, place, delete: remove } = this.#statements;
    const found = row.get(room, kc, id);
    if (found === undefined) return undefined;
    if (found.file === null) return ownBytes(found);
    const data = await this.#files.read(found.file, found.size);
    if (data !== undefined) return data;
    // Its file is gone or cut short (a power loss, a hand): the chunk is missing, and the
    // devices put it again when they learn so (`chunk_missing`). Unless the row changed while
    // the file was read (dropped, or put anew): then it is not this copy's to delete.
    if (place.get(room, kc, id)?.file === found.file) {
      remove.run(room, kc, id);
      this.#forget(found);
    }
    return undefined;
  }

  /** Whether a row's bytes are there: in the row, or in its file at its size. */
  #intact(row: ChunkPlace): boolean {
    return row.file === null || this.#files.holds(row.file, row.size);
  }

  /** Gives back the bytes of a deleted (committed) row, and removes its file. */
  #forget(row: ChunkPlace): void {
    this.#counts.release(row.user, row.bytes);
    this.#bytes -= row.bytes;
    if (row.file !== null) this.#files.remove([row.file]);
  }

  async drop(room: string, kc: string, id: string, only?: Buffer): Promise<boolean> {
    this.flush();
    const { row, delete: remove } = this.#statements;
    // Read and deleted in one transaction: a copy put again meanwhile is never the one dropped.
    const dropped = this.#db.transaction(() => {
      const found = row.get(room, kc, id);
      if (found === undefined) return undefined;
      // A copy whose file is lost is not that copy either: it is dropped too.
      let data: Buffer | undefined;
      if (only !== undefined) {
        data = found.file === null ? ownBytes(found) : this.#files.readNow(found.file, found.size);
      }
      if (only !== undefined && data !== undefined && !only.equals(data)) return undefined;
      remove.run(room, kc, id);
      return found;
    })();
    if (dropped === undefined) return false;
    this.#forget(dropped);
    return true;
  }

  async report(report: FolderReport): Promise<ReportOutcome> {
    const names = report.encrypted ? undefined : report.names;
    const bytes = reportBytes({ ...report, names });
    if (bytes > maxReportBytes) return { full: 'size' };
    const user = userOfRoom(report.room);
    const counted = this.#counts.batch();
    const { reportCounted, reportsInRoom, report: upsert } = this.#statements;
    const outcome = this.#db.transaction((): ReportOutcome => {
      const before = reportCounted.get(report.room, report.doc);
      if (before === undefined && (reportsInRoom.get(report.room) ?? 0) >= maxReportsPerRoom) {
        return { full: 'reports' };
      }
      const change = bytes - (before ?? 0);
      // A report no larger than the one it replaces is kept even at a bound.
      const full = change > 0 ? this.#overBound(counted, user, change) : undefined;
      if (full !== undefined) return full as ReportOutcome;
      upsert.run(
        report.room,
        report.doc,
        user,
        report.device,
        report.files,
        report.bytes,
        report.encrypted ? 1 : 0,
        names === undefined ? null : JSON.stringify(names),
        report.at,
        bytes,
      );
      counted.add(user, change);
      return { stored: true };
    })();
    if ('stored' in outcome) this.#counts.commit(counted);
    return outcome;
  }

  async reportNames(room: string, doc: string): Promise<string[] | undefined> {
    const names = this.#statements.reportNames.get(room, doc);
    return names === undefined || names === null ? undefined : (JSON.parse(names) as string[]);
  }

  /** Deletes the chunks and reports matching `where` (on `user` or `room`); returns bytes per user. */
  delete(where: 'room' | 'user', value: string): Map<string, number> {
    this.flush();
    for (const writing of this.#writing) {
      const room = writing.chunk.room;
      if ((where === 'room' ? room : userOfRoom(room)) === value) writing.deleted = true;
    }
    const db = this.#db;
    const { rows, files } = db.transaction(() => {
      const found = {
        rows: db
          .prepare<[string, string], { user: string; bytes: number }>(
            `SELECT user, sum(bytes) AS bytes FROM (
              SELECT user, bytes FROM chunks WHERE ${where} = ?
              UNION ALL SELECT user, counted AS bytes FROM folderReports WHERE ${where} = ?
            ) GROUP BY user`,
          )
          .all(value, value),
        files: this.#filesWhere(`${where} = ?`, value),
      };
      db.prepare(`DELETE FROM chunks WHERE ${where} = ?`).run(value);
      db.prepare(`DELETE FROM folderReports WHERE ${where} = ?`).run(value);
      return found;
    })();
    this.#files.remove(files);
    this.#recount();
    return new Map(rows.map((row) => [row.user, row.bytes]));
  }

  /** Drops the chunks last used before `before` (ms); returns how many. */
  dropUnused(before: number): number {
    this.flush();
    const { dropped, files } = this.#db.transaction(() => {
      const files = this.#filesWhere('usedAt < ?', before);
      const dropped = this.#db.prepare('DELETE FROM chunks WHERE usedAt < ?').run(before).changes;
      return { dropped, files };
    })();
    this.#files.remove(files);
    if (dropped > 0) this.#recount();
    return dropped;
  }

  /** The file numbers of the rows matching `condition` (SQL, one parameter: `value`). */
  #filesWhere(condition: string, value: string | number): number[] {
    return this.#db
      .prepare<[string | number], number>(
        `SELECT file FROM chunks WHERE ${condition} AND file IS NOT NULL`,
      )
      .pluck()
      .all(value);
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
    const reports = this.#db
      .prepare<[], ReportRow>(
        'SELECT room, doc, device, files, bytes, encrypted, coalesce(json_array_length(names), 0) AS named, at, counted FROM folderReports',
      )
      .all();
    return roomChunksOf(counts, reports.map(reportOfRow));
  }
}

/** A folder report's row as usage reads it (its names counted, not read). */
interface ReportRow {
  room: string;
  doc: string;
  device: string;
  files: number;
  bytes: number;
  encrypted: number;
  named: number;
  at: number;
  counted: number;
}

function reportOfRow(row: ReportRow): ReportSummary & { room: string; counted: number } {
  return { ...row, encrypted: row.encrypted === 1 };
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
      'INSERT OR REPLACE INTO folderReports (room, doc, user, device, files, bytes, encrypted, names, at, counted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    reportCounted: db
      .prepare<[string, string], number>(
        'SELECT counted FROM folderReports WHERE room = ? AND doc = ?',
      )
      .pluck(),
    reportsInRoom: db
      .prepare<[string], number>('SELECT count(*) FROM folderReports WHERE room = ?')
      .pluck(),
    reportNames: db
      .prepare<[string, string], string | null>(
        'SELECT names FROM folderReports WHERE room = ? AND doc = ?',
      )
      .pluck(),
  };
}
