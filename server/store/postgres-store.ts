import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Piece } from '../../protocol/relay-frames.ts';
import { userOfRoom } from '../../protocol/room-id.ts';
import type { Logger } from '../log.ts';
import { type ChunkStore, roomsWithChunks, unusedChunkMs } from './chunk-store.ts';
import { byDocument, droppableEntries, type HistoryRules } from './compaction.ts';
import type {
  AppendOutcome,
  CompactionReport,
  DocumentStore,
  EntryPage,
  NewEntry,
  StoreBounds,
  StoredEntry,
  StoreUsage,
} from './document-store.ts';
import { changeUsers, commitBatch, lockUsers } from './postgres-append.ts';
import { deleteChunksIn, PostgresChunkStore } from './postgres-chunks.ts';
import { compactionLockKey, ensureStoreSchema, type StoreTables } from './postgres-schema.ts';

export interface PostgresStoreOptions {
  /** postgres:// URL of the database (its password is never logged). */
  url: string;
  bounds: StoreBounds;
  history: HistoryRules;
  logger: Logger;
  /** Clock for the entries' times, ms; default Date.now. */
  now?: () => number;
}

interface EntryRow {
  id: string;
  pos: string;
  at: string;
  device: string;
  kc: string | null;
  covers: string | null;
  part: Piece | null;
  keep: boolean;
  data: Buffer;
}

function toStoredEntry(row: EntryRow): StoredEntry {
  const entry: StoredEntry = {
    pos: Number(row.pos),
    at: Number(row.at),
    device: row.device,
    data: row.data,
  };
  if (row.kc !== null) entry.kc = row.kc;
  if (row.covers !== null) entry.covers = Number(row.covers);
  if (row.part !== null) entry.part = row.part;
  if (row.keep) entry.keep = true;
  return entry;
}

const entryColumns = sql.raw('e.id, e.pos, e.at, e.device, e.kc, e.covers, e.part, e.keep, e.data');

/** Entries per read at most: a page of tiny entries does not scan the whole document. */
const entriesPerRead = 500;

interface Queued {
  entry: NewEntry;
  resolve: (outcome: AppendOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * The cluster store in PostgreSQL (see `DocumentStore`; docs/store.md, "The cluster store").
 * Every relay node of a cluster opens the same database, so any node answers a catch-up. The
 * appends of one event-loop turn are committed in one transaction, and each resolves only after
 * PostgreSQL's commit: an acknowledged append survives a `kill -9` of the node. The tables are
 * created at the first use (retried at the next one while the database cannot be reached).
 */
export class PostgresDocumentStore implements DocumentStore {
  readonly #db: Kysely<StoreTables>;
  readonly #bounds: StoreBounds;
  readonly #history: HistoryRules;
  readonly #now: () => number;
  #ready: Promise<void> | undefined;
  #queue: Queued[] = [];
  #flushing: Promise<void> = Promise.resolve();
  #flushScheduled = false;
  #closed = false;
  /** The store's bytes as last counted (by this node's last batch, sweep or usage). */
  #totalBytes = 0;
  readonly #chunks: PostgresChunkStore;

  constructor(options: PostgresStoreOptions) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: 10,
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      query_timeout: 10_000,
    });
    const lost = (err: Error) =>
      options.logger.warn({ err: err.message }, 'document store: postgres connection lost');
    // An idle client whose backend was terminated emits here; without a listener it would crash.
    pool.on('error', lost);
    pool.on('connect', (client) => client.on('error', lost));
    this.#db = new Kysely<StoreTables>({ dialect: new PostgresDialect({ pool }) });
    this.#bounds = options.bounds;
    this.#history = options.history;
    this.#now = options.now ?? Date.now;
    this.#chunks = new PostgresChunkStore({
      db: this.#db,
      bounds: this.#bounds,
      now: this.#now,
      ready: () => this.ready(),
      counted: (total) => {
        this.#totalBytes = total;
      },
    });
  }

  get chunks(): ChunkStore {
    return this.#chunks;
  }

  /** Creates the tables when absent and counts the bytes; rejects while it cannot. */
  ready(): Promise<void> {
    this.#ready ??= (async () => {
      await ensureStoreSchema(this.#db);
      await this.#recount();
    })().catch((err: unknown) => {
      this.#ready = undefined;
      throw err;
    });
    return this.#ready;
  }

  async #recount(): Promise<void> {
    const found = await sql<{ total: string }>`
      SELECT coalesce(sum(bytes), 0) AS total FROM store_users`.execute(this.#db);
    this.#totalBytes = Number(found.rows[0]?.total ?? 0);
    await this.#chunks.recount();
  }

  append(entry: NewEntry): Promise<AppendOutcome> {
    if (this.#closed) return Promise.reject(new Error('the document store is closed'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ entry, resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => {
        this.#flushScheduled = false;
        // One batch at a time: a batch's positions follow the previous one's.
        this.#flushing = this.#flushing.then(() => this.#flush());
      });
    });
  }

  /** Commits the queued appends in one transaction, then settles them in order. */
  async #flush(): Promise<void> {
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    try {
      await this.ready();
      const entries = queue.map((q) => q.entry);
      const batch = await commitBatch(this.#db, entries, this.#bounds, this.#now());
      this.#totalBytes = batch.totalBytes;
      queue.forEach((q, i) => {
        q.resolve(batch.outcomes[i] as AppendOutcome);
      });
    } catch (err: unknown) {
      // Rolled back: nothing of the batch is stored.
      for (const q of queue) q.reject(err);
    }
  }

  /** Waits for every append queued so far. */
  async #settled(): Promise<void> {
    if (this.#queue.length > 0) this.#flushing = this.#flushing.then(() => this.#flush());
    await this.#flushing;
  }

  async read(room: string, doc: string, after: number, maxBytes: number): Promise<EntryPage> {
    await this.ready();
    // One statement, so one snapshot: the last position and the entries agree.
    const found = await sql<EntryRow & { last_pos: string; upto: string; n: string }>`
      SELECT d.last_pos, w.* FROM store_documents d LEFT JOIN LATERAL (
        SELECT ${entryColumns},
          sum(octet_length(e.data)) OVER (ORDER BY e.pos) AS upto,
          row_number() OVER (ORDER BY e.pos) AS n
        FROM store_entries e WHERE e.document = d.id AND e.pos > ${after}
        ORDER BY e.pos LIMIT ${entriesPerRead}
      ) w ON true
      WHERE d.room = ${room} AND d.doc = ${doc} AND (w.n IS NULL OR w.n = 1 OR w.upto <= ${maxBytes})
      ORDER BY w.pos`.execute(this.#db);
    const first = found.rows[0];
    if (first === undefined) return { entries: [], lastPos: 0 };
    const entries = found.rows.filter((row) => row.pos !== null).map(toStoredEntry);
    return { entries, lastPos: Number(first.last_pos) };
  }

  async newestSnapshot(
    room: string,
    doc: string,
    kc: string | undefined,
    after: number,
  ): Promise<StoredEntry[]> {
    await this.ready();
    const snapshots = await sql<EntryRow & { document: string }>`
      SELECT e.document, ${entryColumns} FROM store_entries e
      JOIN store_documents d ON d.id = e.document
      WHERE d.room = ${room} AND d.doc = ${doc} AND e.kc IS NOT DISTINCT FROM ${kc ?? null}
        AND e.covers IS NOT NULL AND e.covers > ${after} AND e.covers < e.pos
      ORDER BY e.pos DESC`.execute(this.#db);
    for (const row of snapshots.rows) {
      if (row.part === null) return [toStoredEntry(row)];
      const part = row.part;
      // A snapshot in pieces counts once each of them is here, each once.
      const pieces = await sql<EntryRow>`
        SELECT ${entryColumns} FROM store_entries e
        WHERE e.document = ${row.document} AND e.kc IS NOT DISTINCT FROM ${kc ?? null}
          AND e.covers = ${row.covers} AND e.part->>'m' = ${part.m}
        ORDER BY e.pos`.execute(this.#db);
      const indexes = new Set(pieces.rows.map((p) => p.part?.i));
      if (indexes.size === part.n && pieces.rows.length === part.n) {
        return pieces.rows.map(toStoredEntry);
      }
    }
    return [];
  }

  /**
   * Per document of the room, its key check values from the smallest up, each the next one
   * above the last on `store_entries_keys` (one look-up per value, however many entries).
   */
  async keyChecks(room: string): Promise<string[]> {
    await this.ready();
    const found = await sql<{ kc: string }>`
      WITH RECURSIVE found(document, kc) AS (
        SELECT d.id, (SELECT min(e.kc) FROM store_entries e
          WHERE e.document = d.id AND e.kc IS NOT NULL)
        FROM store_documents d WHERE d.room = ${room}
        UNION ALL
        SELECT f.document, (SELECT min(e.kc) FROM store_entries e
          WHERE e.document = f.document AND e.kc > f.kc)
        FROM found f WHERE f.kc IS NOT NULL
      )
      SELECT kc FROM found WHERE kc IS NOT NULL GROUP BY kc ORDER BY kc COLLATE "C"`.execute(
      this.#db,
    );
    return found.rows.map((row) => row.kc);
  }

  async usage(): Promise<StoreUsage> {
    await this.ready();
    await this.#recount();
    const found = await sql<{ room: string; user: string; documents: number; bytes: string }>`
      SELECT room, user_id AS user, count(*)::integer AS documents, sum(bytes) AS bytes
      FROM store_documents GROUP BY room, user_id
      ORDER BY user_id COLLATE "C", room COLLATE "C"`.execute(this.#db);
    const rooms = found.rows.map((row) => ({ ...row, bytes: Number(row.bytes) }));
    return {
      bytes: this.#totalBytes,
      bounds: this.#bounds,
      rooms: roomsWithChunks(rooms, await this.#chunks.usage()),
    };
  }

  bytes(): number {
    return this.#totalBytes;
  }

  async rooms(): Promise<string[]> {
    await this.ready();
    const found = await sql<{ room: string }>`
      SELECT DISTINCT room FROM store_documents`.execute(this.#db);
    const rooms = found.rows.map((row) => row.room);
    return [...new Set([...rooms, ...(await this.#chunks.rooms())])];
  }

  deleteRoom(room: string): Promise<void> {
    return this.#deleteDocuments(userOfRoom(room), sql`room = ${room}`);
  }

  deleteUser(user: string): Promise<void> {
    return this.#deleteDocuments(user, sql`user_id = ${user}`);
  }

  /**
   * Deletes the documents of one user matching `where` (their entries go with them), under the
   * user's lock as an append takes it. PostgreSQL reuses the space (autovacuum).
   */
  async #deleteDocuments(user: string, where: ReturnType<typeof sql>): Promise<void> {
    await this.#settled();
    await this.#chunks.settled();
    await this.ready();
    await this.#db.transaction().execute(async (trx) => {
      await lockUsers(trx, [user]);
      const chunkBytes = await deleteChunksIn(trx, user, where);
      const gone = await sql<{ bytes: string }>`
        DELETE FROM store_documents WHERE user_id = ${user} AND ${where}
        RETURNING bytes`.execute(trx);
      const freed = gone.rows.reduce((sum, row) => sum + Number(row.bytes), chunkBytes);
      await changeUsers(trx, new Map([[user, -freed]]));
    });
    await this.#recount();
  }

  async compact(now: number): Promise<CompactionReport> {
    await this.#settled();
    await this.ready();
    const report = await this.#db.transaction().execute((trx) => this.#compactIn(trx, now));
    const chunks = await this.#chunks.dropUnused(now - unusedChunkMs(this.#history.keepMs));
    await this.#recount();
    return chunks === 0 ? report : { ...report, chunks };
  }

  /** One node at a time compacts (the others skip the turn); the decision is `droppableEntries`'. */
  async #compactIn(trx: Parameters<typeof lockUsers>[0], now: number): Promise<CompactionReport> {
    const report: CompactionReport = { dropped: 0, bytes: 0 };
    const lock = await sql<{ locked: boolean }>`
      SELECT pg_try_advisory_xact_lock(${compactionLockKey}) AS locked`.execute(trx);
    if (lock.rows[0]?.locked !== true) return report;
    const rows = await sql<CandidateRow>`
      SELECT e.id, e.document, d.user_id, e.pos, e.at, e.kc, e.covers, e.part, e.keep, e.bytes
      FROM store_entries e JOIN store_documents d ON d.id = e.document
      WHERE e.document IN (SELECT DISTINCT document FROM store_entries WHERE covers IS NOT NULL)
      ORDER BY e.document, e.pos`.execute(trx);
    const dropped: number[] = [];
    const users = new Set<string>();
    for (const document of byDocument(rows.rows.map(candidateOfRow))) {
      const ids = droppableEntries(document, now, this.#history);
      if (ids.length > 0) users.add((document[0] as { user: string }).user);
      dropped.push(...ids);
    }
    if (dropped.length === 0) return report;
    await lockUsers(trx, [...users]);
    const gone = await sql<{ document: string; user_id: string; bytes: string }>`
      DELETE FROM store_entries e USING store_documents d
      WHERE e.id = ANY(${dropped}::bigint[]) AND d.id = e.document
      RETURNING e.document, d.user_id, e.bytes`.execute(trx);
    const perDocument = new Map<number, number>();
    const perUser = new Map<string, number>();
    for (const row of gone.rows) {
      const bytes = Number(row.bytes);
      perDocument.set(Number(row.document), (perDocument.get(Number(row.document)) ?? 0) + bytes);
      perUser.set(row.user_id, (perUser.get(row.user_id) ?? 0) - bytes);
      report.dropped += 1;
      report.bytes += bytes;
    }
    const ids = [...perDocument.keys()];
    const freed = ids.map((id) => perDocument.get(id) ?? 0);
    await sql`UPDATE store_documents d SET bytes = d.bytes - u.bytes
      FROM unnest(${ids}::bigint[], ${freed}::bigint[]) AS u(id, bytes)
      WHERE d.id = u.id`.execute(trx);
    await changeUsers(trx, perUser);
    return report;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#settled();
    await this.#chunks.settled();
    await this.#db.destroy();
  }
}

interface CandidateRow {
  id: string;
  document: string;
  user_id: string;
  pos: string;
  at: string;
  kc: string | null;
  covers: string | null;
  part: Piece | null;
  keep: boolean;
  bytes: string;
}

function candidateOfRow(row: CandidateRow) {
  return {
    id: Number(row.id),
    document: Number(row.document),
    user: row.user_id,
    pos: Number(row.pos),
    at: Number(row.at),
    kc: row.kc ?? undefined,
    covers: row.covers === null ? undefined : Number(row.covers),
    part: row.part ?? undefined,
    keep: row.keep,
  };
}

/** The cluster store at `options.url` (connects at its first use). */
export function openPostgresStore(options: PostgresStoreOptions): PostgresDocumentStore {
  return new PostgresDocumentStore(options);
}
