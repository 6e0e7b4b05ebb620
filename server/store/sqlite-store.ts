import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import type { Piece } from '../../protocol/relay-frames.ts';
import { userOfRoom } from '../../protocol/room-id.ts';
import { openSyncSqlite } from '../db/sqlite-engine.ts';
import { reclaimSpace } from '../sqlite-space.ts';
import { ByteCounts, boundPassed, type CountBatch } from './byte-counts.ts';
import { type ChunkStore, roomsWithChunks, unusedChunkMs } from './chunk-store.ts';
import { planCompaction } from './compaction.ts';
import {
  type AppendOutcome,
  type CompactionReport,
  type DocumentStore,
  type EntryPage,
  entryBytes,
  type NewEntry,
  type StoreBounds,
  type StoredEntry,
  type StoreUsage,
} from './document-store.ts';
import { chunkSchema, reportColumn } from './sqlite-chunk-schema.ts';
import { SqliteChunkStore } from './sqlite-chunks.ts';

/**
 * store.db's layout, version 1. `documents` has one row per (room, document key) with the user
 * of its room, the last position given (positions are never reused, even once the entries with
 * them are gone) and the bytes its entries count. `entries` holds each entry's bytes as a BLOB
 * (what the device sent, base64-decoded: the host cannot read it when the project is encrypted),
 * its position, time, sender, key check value, for a snapshot the position it covers, and
 * whether the history keeps it for its whole window (`keep`: a version just before a delete).
 * Version 2 adds the chunk tables (`sqlite-chunk-schema.ts`). Version 3 counts each folder
 * report against its user (`folderReports.counted`, filled at the first open from the rows) and
 * adds `entriesKeys`, which finds a room's key check values without reading its entries; a
 * sync-host of version 2 then refuses the file instead of storing reports it would not count.
 */
const schemaVersion = 3;

const schema = `
CREATE TABLE IF NOT EXISTS documents (
  id INTEGER PRIMARY KEY,
  room TEXT NOT NULL,
  doc TEXT NOT NULL,
  user TEXT NOT NULL,
  lastPos INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  UNIQUE (room, doc)
);
CREATE INDEX IF NOT EXISTS documentsByUser ON documents (user);
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  document INTEGER NOT NULL,
  pos INTEGER NOT NULL,
  at INTEGER NOT NULL,
  device TEXT NOT NULL,
  kc TEXT,
  covers INTEGER,
  part TEXT,
  keep INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (document, pos)
);
CREATE INDEX IF NOT EXISTS entriesSnapshots ON entries (document, kc, pos) WHERE covers IS NOT NULL;
CREATE INDEX IF NOT EXISTS entriesKeys ON entries (document, kc) WHERE kc IS NOT NULL;
`;

/**
 * The distinct key check values of a room's entries: per document, from the smallest up, each
 * the next one above the last on the index `entriesKeys` (one look-up per value, however many
 * entries carry it).
 */
export const keyChecksQuery = `
WITH RECURSIVE found(document, kc) AS (
  SELECT d.id, (SELECT min(e.kc) FROM entries e WHERE e.document = d.id AND e.kc IS NOT NULL)
  FROM documents d WHERE d.room = ?
  UNION ALL
  SELECT f.document, (SELECT min(e.kc) FROM entries e WHERE e.document = f.document AND e.kc > f.kc)
  FROM found f WHERE f.kc IS NOT NULL
)
SELECT DISTINCT kc FROM found WHERE kc IS NOT NULL ORDER BY kc`;

/** The WAL file is cut back to this size at each checkpoint. */
const journalSizeLimitBytes = 4 * 1024 * 1024;

interface EntryRow {
  id: number;
  pos: number;
  at: number;
  device: string;
  kc: string | null;
  covers: number | null;
  part: string | null;
  keep: number;
  bytes: number;
  data: Buffer | Uint8Array;
}

function toStoredEntry(row: EntryRow): StoredEntry {
  const entry: StoredEntry = {
    pos: row.pos,
    at: row.at,
    device: row.device,
    data: Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data),
  };
  if (row.kc !== null) entry.kc = row.kc;
  if (row.covers !== null) entry.covers = row.covers;
  if (row.part !== null) entry.part = JSON.parse(row.part) as Piece;
  if (row.keep === 1) entry.keep = true;
  return entry;
}

interface Queued {
  entry: NewEntry;
  resolve: (outcome: AppendOutcome) => void;
  reject: (err: unknown) => void;
}

export interface SqliteStoreOptions {
  path: string;
  bounds: StoreBounds;
  /** Clock for the entries' times, ms; default Date.now. */
  now?: () => number;
  /** History rules for compaction (`store.historyDays`, `store.historyStepMinutes`), in ms. */
  history: { keepMs: number; stepMs: number };
}

/** Opens (and creates) store.db: WAL with `synchronous=NORMAL`, incremental vacuum. */
function openStoreFile(path: string): BetterSqlite3.Database {
  mkdirSync(dirname(path), { recursive: true });
  const db = openSyncSqlite(path);
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version > schemaVersion) {
    db.close();
    throw new Error(
      `${path} has layout ${version}, newer than this relay's (${schemaVersion}): it was written by a newer sync-host; run that one`,
    );
  }
  db.exec('PRAGMA auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: a commit survives a process crash (kill -9), as relay.db's do.
  db.pragma('synchronous = NORMAL');
  db.pragma(`journal_size_limit = ${journalSizeLimitBytes}`);
  db.exec(schema);
  db.exec(chunkSchema);
  reportColumn(db);
  if (version < schemaVersion) db.exec(`PRAGMA user_version = ${schemaVersion}`);
  return db;
}

/**
 * The single-node store in SQLite (see `DocumentStore`). Appends wait in memory until the end of
 * the event-loop turn and are committed together, in one transaction; each resolves only after
 * that commit. The bytes per user and in total are counted in memory (read once at open), so the
 * bounds are checked without a query.
 */
export class SqliteDocumentStore implements DocumentStore {
  readonly #db: BetterSqlite3.Database;
  readonly #bounds: StoreBounds;
  readonly #now: () => number;
  readonly #history: { keepMs: number; stepMs: number };
  /** Bytes per user and in all, of documents, chunks and folder reports (shared with the chunk store). */
  readonly #counts = new ByteCounts();
  readonly #chunks: SqliteChunkStore;
  /** Document ids by room and key (`room\0doc`). */
  readonly #documentIds = new Map<string, number>();
  #queue: Queued[] = [];
  #flushScheduled = false;
  #closed = false;
  /** The close under way: puts whose chunk file is being written finish first. */
  #closing: Promise<void> | undefined;
  readonly #statements;

  constructor(options: SqliteStoreOptions) {
    this.#db = openStoreFile(options.path);
    this.#bounds = options.bounds;
    this.#now = options.now ?? Date.now;
    this.#history = options.history;
    const db = this.#db;
    this.#statements = {
      findDocument: db.prepare<[string, string], { id: number }>(
        'SELECT id FROM documents WHERE room = ? AND doc = ?',
      ),
      insertDocument: db.prepare<[string, string, string]>(
        'INSERT INTO documents (room, doc, user) VALUES (?, ?, ?)',
      ),
      nextPosition: db.prepare<[number, number]>(
        'UPDATE documents SET lastPos = lastPos + 1, bytes = bytes + ? WHERE id = ? RETURNING lastPos',
      ),
      insertEntry: db.prepare(
        'INSERT INTO entries (document, pos, at, device, kc, covers, part, keep, bytes, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      lastPos: db.prepare<[string, string], { lastPos: number; id: number }>(
        'SELECT id, lastPos FROM documents WHERE room = ? AND doc = ?',
      ),
      entriesAfter: db.prepare<[number, number], EntryRow>(
        'SELECT id, pos, at, device, kc, covers, part, keep, bytes, data FROM entries WHERE document = ? AND pos > ? ORDER BY pos',
      ),
      snapshots: db.prepare<[number, string | null, number], EntryRow>(
        'SELECT id, pos, at, device, kc, covers, part, keep, bytes, data FROM entries WHERE document = ? AND kc IS ? AND covers IS NOT NULL AND covers > ? AND covers < pos ORDER BY pos DESC',
      ),
      snapshotPieces: db.prepare<[number, string | null, number, string], EntryRow>(
        "SELECT id, pos, at, device, kc, covers, part, keep, bytes, data FROM entries WHERE document = ? AND kc IS ? AND covers = ? AND json_extract(part, '$.m') = ? ORDER BY pos",
      ),
      keyChecks: db.prepare<[string], { kc: string }>(keyChecksQuery),
    };
    this.#counts.recount(db);
    const folder = join(dirname(options.path), 'chunks');
    this.#chunks = new SqliteChunkStore(db, folder, this.#bounds, this.#counts, this.#now);
  }

  get chunks(): ChunkStore {
    return this.#chunks;
  }

  append(entry: NewEntry): Promise<AppendOutcome> {
    if (this.#closed) return Promise.reject(new Error('the document store is closed'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ entry, resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => this.#flush());
    });
  }

  /** Commits every queued append in one transaction, then settles them in order. */
  #flush(): void {
    this.#flushScheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    const counted = this.#counts.batch();
    let outcomes: AppendOutcome[];
    try {
      outcomes = this.#db.transaction(() => queue.map((q) => this.#insert(q.entry, counted)))();
    } catch (err: unknown) {
      // Nothing of the batch is stored; the documents created in it are gone too.
      this.#documentIds.clear();
      for (const q of queue) q.reject(err);
      return;
    }
    this.#counts.commit(counted);
    queue.forEach((q, i) => {
      q.resolve(outcomes[i] as AppendOutcome);
    });
  }

  #insert(entry: NewEntry, counted: CountBatch): AppendOutcome {
    const user = userOfRoom(entry.room);
    const bytes = entryBytes(entry);
    const full = boundPassed(counted, this.#bounds, user, bytes);
    if (full !== undefined) return { full };
    const document = this.#documentId(entry.room, entry.doc, true) as number;
    const { lastPos } = this.#statements.nextPosition.get(bytes, document) as { lastPos: number };
    this.#statements.insertEntry.run(
      document,
      lastPos,
      this.#now(),
      entry.device,
      entry.kc ?? null,
      entry.covers ?? null,
      entry.part === undefined ? null : JSON.stringify(entry.part),
      entry.keep === true ? 1 : 0,
      bytes,
      entry.data,
    );
    counted.add(user, bytes);
    return { pos: lastPos };
  }

  #documentId(room: string, doc: string, create: boolean): number | undefined {
    const key = `${room}\u0000${doc}`;
    let id = this.#documentIds.get(key);
    if (id !== undefined) return id;
    id = this.#statements.findDocument.get(room, doc)?.id;
    if (id === undefined) {
      if (!create) return undefined;
      id = Number(this.#statements.insertDocument.run(room, doc, userOfRoom(room)).lastInsertRowid);
    }
    this.#documentIds.set(key, id);
    return id;
  }

  async read(room: string, doc: string, after: number, maxBytes: number): Promise<EntryPage> {
    const found = this.#statements.lastPos.get(room, doc);
    if (found === undefined) return { entries: [], lastPos: 0 };
    const entries: StoredEntry[] = [];
    let bytes = 0;
    for (const row of this.#statements.entriesAfter.iterate(found.id, after)) {
      if (entries.length > 0 && bytes + row.data.length > maxBytes) break;
      entries.push(toStoredEntry(row));
      bytes += row.data.length;
    }
    return { entries, lastPos: found.lastPos };
  }

  async newestSnapshot(
    room: string,
    doc: string,
    kc: string | undefined,
    after: number,
  ): Promise<StoredEntry[]> {
    const document = this.#statements.lastPos.get(room, doc);
    if (document === undefined) return [];
    const { snapshots, snapshotPieces } = this.#statements;
    for (const row of snapshots.all(document.id, kc ?? null, after)) {
      if (row.part === null) return [toStoredEntry(row)];
      const part = JSON.parse(row.part) as Piece;
      // A snapshot in pieces counts once each of them is here, each once.
      const pieces = snapshotPieces.all(document.id, kc ?? null, row.covers as number, part.m);
      const indexes = new Set(pieces.map((p) => (JSON.parse(p.part as string) as Piece).i));
      if (indexes.size === part.n && pieces.length === part.n) return pieces.map(toStoredEntry);
    }
    return [];
  }

  async keyChecks(room: string): Promise<string[]> {
    return this.#statements.keyChecks.all(room).map((row) => row.kc);
  }

  async usage(): Promise<StoreUsage> {
    const rooms = this.#db
      .prepare<[], { room: string; user: string; documents: number; bytes: number }>(
        'SELECT room, user, count(*) AS documents, sum(bytes) AS bytes FROM documents GROUP BY room ORDER BY user, room',
      )
      .all();
    return {
      bytes: this.#counts.total,
      bounds: this.#bounds,
      rooms: roomsWithChunks(rooms, this.#chunks.usage()),
    };
  }

  bytes(): number {
    return this.#counts.total;
  }

  /** What the bounds count for each user now (documents, chunks and folder reports). */
  countedBytes(): Map<string, number> {
    return this.#counts.byUser();
  }

  async rooms(): Promise<string[]> {
    const rooms = this.#db.prepare<[], string>('SELECT DISTINCT room FROM documents').pluck().all();
    return [...new Set([...rooms, ...this.#chunks.rooms()])];
  }

  async deleteRoom(room: string): Promise<void> {
    this.#deleteDocuments('room', room);
  }

  async deleteUser(user: string): Promise<void> {
    this.#deleteDocuments('user', user);
  }

  /** Deletes the documents (with their entries) and chunks matching `where`, gives the space back. */
  #deleteDocuments(where: 'room' | 'user', value: string): void {
    this.#flush();
    const freed = this.#chunks.delete(where, value);
    const gone = this.#db.transaction(() => {
      const rows = this.#db
        .prepare<[string], { id: number; room: string; doc: string; user: string; bytes: number }>(
          `SELECT id, room, doc, user, bytes FROM documents WHERE ${where} = ?`,
        )
        .all(value);
      const deleteEntries = this.#db.prepare('DELETE FROM entries WHERE document = ?');
      const deleteDocument = this.#db.prepare('DELETE FROM documents WHERE id = ?');
      for (const row of rows) {
        deleteEntries.run(row.id);
        deleteDocument.run(row.id);
      }
      return rows;
    })();
    if (gone.length === 0 && freed.size === 0) return;
    for (const row of gone) {
      this.#documentIds.delete(`${row.room}\u0000${row.doc}`);
      freed.set(row.user, (freed.get(row.user) ?? 0) + row.bytes);
    }
    for (const [user, bytes] of freed) this.#counts.release(user, bytes);
    reclaimSpace(this.#db);
  }

  async compact(now: number): Promise<CompactionReport> {
    this.#flush();
    const report = planCompaction(this.#db, now, this.#history);
    const chunks = this.#chunks.dropUnused(now - unusedChunkMs(this.#history.keepMs));
    if (report.dropped === 0 && chunks === 0) return report;
    // Recount from the rows: compaction changed the documents' bytes.
    this.#counts.recount(this.#db);
    reclaimSpace(this.#db);
    return { ...report, chunks };
  }

  async close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#chunks.close();
      this.#flush();
      this.#closed = true;
      this.#db.close();
    })();
    return this.#closing;
  }
}

/** Opens the single-node document store at `path` (created when absent); throws when it cannot. */
export function openSqliteStore(options: SqliteStoreOptions): DocumentStore {
  return new SqliteDocumentStore(options);
}
