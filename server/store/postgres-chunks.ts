import { type Kysely, sql, type Transaction } from 'kysely';
import { maxReportBytes, maxReportsPerRoom, reportBytes } from '../../protocol/relay-frames.ts';
import { userOfRoom } from '../../protocol/room-id.ts';
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
import { changeUsers, lockUsers } from './postgres-append.ts';
import type { StoreTables } from './postgres-schema.ts';

interface Queued {
  chunk: NewChunk;
  resolve: (outcome: PutOutcome) => void;
  reject: (err: unknown) => void;
}

export interface PostgresChunkOptions {
  db: Kysely<StoreTables>;
  bounds: StoreBounds;
  now: () => number;
  /** Resolves once the tables exist. */
  ready: () => Promise<void>;
  /** The store's bytes as a batch left them. */
  counted: (totalBytes: number) => void;
}

/**
 * The cluster's chunk store in PostgreSQL (see `ChunkStore`; tables `store_chunks` and
 * `store_folder_reports`). The puts of one event-loop turn are committed in one transaction
 * under the locks of their users' rows (as appends take them), so the user bound holds across
 * nodes and two nodes never both count one chunk.
 */
export class PostgresChunkStore implements ChunkStore {
  readonly #options: PostgresChunkOptions;
  #queue: Queued[] = [];
  #flushing: Promise<void> = Promise.resolve();
  #flushScheduled = false;
  /** The chunks' bytes as last counted. */
  #bytes = 0;

  constructor(options: PostgresChunkOptions) {
    this.#options = options;
  }

  put(chunk: NewChunk): Promise<PutOutcome> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ chunk, resolve, reject });
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => {
        this.#flushScheduled = false;
        this.#flushing = this.#flushing.then(() => this.#flush());
      });
    });
  }

  bytes(): number {
    return this.#bytes;
  }

  /** Counts the chunks' bytes again (at the store's recounts). */
  async recount(): Promise<void> {
    const found = await sql<{ total: string }>`
      SELECT coalesce(sum(bytes), 0) AS total FROM store_chunks`.execute(this.#options.db);
    this.#bytes = Number(found.rows[0]?.total ?? 0);
  }

  /** Waits for every put queued so far. */
  async settled(): Promise<void> {
    if (this.#queue.length > 0) this.#flushing = this.#flushing.then(() => this.#flush());
    await this.#flushing;
  }

  async #flush(): Promise<void> {
    const queue = this.#queue;
    this.#queue = [];
    if (queue.length === 0) return;
    try {
      await this.#options.ready();
      const chunks = queue.map((q) => q.chunk);
      const { outcomes, added, totalBytes } = await this.#options.db
        .transaction()
        .execute((trx) => this.#commit(trx, chunks));
      // Counted once committed (a batch rolled back adds nothing).
      this.#bytes += added;
      this.#options.counted(totalBytes);
      queue.forEach((q, i) => {
        q.resolve(outcomes[i] as PutOutcome);
      });
    } catch (err: unknown) {
      // Rolled back: nothing of the batch is stored.
      for (const q of queue) q.reject(err);
    }
  }

  async #commit(
    trx: Transaction<StoreTables>,
    chunks: readonly NewChunk[],
  ): Promise<{ outcomes: PutOutcome[]; added: number; totalBytes: number }> {
    const { bounds, now } = this.#options;
    const at = now();
    const userBytes = await lockUsers(trx, [...new Set(chunks.map((c) => userOfRoom(c.room)))]);
    const total = await sql<{ total: string }>`
      SELECT coalesce(sum(bytes), 0) AS total FROM store_users`.execute(trx);
    let totalBytes = Number(total.rows[0]?.total ?? 0);
    const added = new Map<string, number>();
    const outcomes: PutOutcome[] = [];
    for (const chunk of chunks) {
      const touched = await sql`UPDATE store_chunks SET used_at = ${at}
        WHERE room = ${chunk.room} AND kc = ${chunk.kc} AND id = ${chunk.id}`.execute(trx);
      if (Number(touched.numAffectedRows ?? 0) > 0) {
        outcomes.push({ stored: true, already: true });
        continue;
      }
      const user = userOfRoom(chunk.room);
      const bytes = chunkBytes(chunk);
      const before = userBytes.get(user) ?? 0;
      if (before + bytes > bounds.userMaxBytes) outcomes.push({ full: 'user' });
      else if (totalBytes + bytes > bounds.maxBytes) outcomes.push({ full: 'store' });
      else {
        await sql`INSERT INTO store_chunks
          (room, kc, id, user_id, size, bytes, stored_at, used_at, data)
          VALUES (${chunk.room}, ${chunk.kc}, ${chunk.id}, ${user}, ${chunk.data.length},
            ${bytes}, ${at}, ${at}, ${chunk.data})`.execute(trx);
        userBytes.set(user, before + bytes);
        totalBytes += bytes;
        added.set(user, (added.get(user) ?? 0) + bytes);
        outcomes.push({ stored: true, already: false });
      }
    }
    await changeUsers(trx, added);
    const sum = [...added.values()].reduce((all, bytes) => all + bytes, 0);
    return { outcomes, added: sum, totalBytes };
  }

  async have(room: string, kc: string, ids: readonly string[]): Promise<string[]> {
    await this.settled();
    await this.#options.ready();
    if (ids.length === 0) return [];
    const found = await sql<{ id: string }>`UPDATE store_chunks SET used_at = ${this.#options.now()}
      WHERE room = ${room} AND kc = ${kc} AND id = ANY(${[...ids]}::text[])
      RETURNING id`.execute(this.#options.db);
    const held = new Set(found.rows.map((row) => row.id));
    return ids.filter((id) => held.has(id));
  }

  async get(room: string, kc: string, id: string): Promise<Buffer | undefined> {
    await this.settled();
    await this.#options.ready();
    const found = await sql<{ data: Buffer }>`SELECT data FROM store_chunks
      WHERE room = ${room} AND kc = ${kc} AND id = ${id}`.execute(this.#options.db);
    return found.rows[0]?.data;
  }

  /**
   * Drops a chunk found damaged under its user's lock (taken before the chunk's row, as a put
   * takes them); with `only`, the row goes only while its bytes are still those.
   */
  async drop(room: string, kc: string, id: string, only?: Buffer): Promise<boolean> {
    await this.settled();
    await this.#options.ready();
    const freed = await this.#options.db.transaction().execute(async (trx) => {
      await lockUsers(trx, [userOfRoom(room)]);
      const same = only === undefined ? sql`true` : sql`data = ${only}`;
      const gone = await sql<{ user_id: string; bytes: string }>`DELETE FROM store_chunks
        WHERE room = ${room} AND kc = ${kc} AND id = ${id} AND ${same}
        RETURNING user_id, bytes`.execute(trx);
      if (gone.rows.length === 0) return undefined;
      await changeUsers(trx, freedPerUser(gone.rows));
      const total = await sql<{ total: string }>`
        SELECT coalesce(sum(bytes), 0) AS total FROM store_users`.execute(trx);
      return { bytes: Number(gone.rows[0]?.bytes ?? 0), total: Number(total.rows[0]?.total ?? 0) };
    });
    if (freed === undefined) return false;
    this.#bytes -= freed.bytes;
    this.#options.counted(freed.total);
    return true;
  }

  /**
   * Keeps a report under its user's lock (as a put takes it), so the bounds and the room's
   * number of reports hold across nodes.
   */
  async report(report: FolderReport): Promise<ReportOutcome> {
    const names = report.encrypted ? undefined : report.names;
    const bytes = reportBytes({ ...report, names });
    if (bytes > maxReportBytes) return { full: 'size' };
    await this.#options.ready();
    const user = userOfRoom(report.room);
    const kept = await this.#options.db.transaction().execute(async (trx) => {
      const userBytes = await lockUsers(trx, [user]);
      const found = await sql<{ counted: string; reports: string }>`
        SELECT (SELECT counted FROM store_folder_reports WHERE room = ${report.room}
            AND doc = ${report.doc}) AS counted,
          (SELECT count(*) FROM store_folder_reports WHERE room = ${report.room}) AS reports
        `.execute(trx);
      const row = found.rows[0];
      const before = row?.counted === null || row === undefined ? undefined : Number(row.counted);
      if (before === undefined && Number(row?.reports ?? 0) >= maxReportsPerRoom) {
        return { outcome: { full: 'reports' } as const };
      }
      const change = bytes - (before ?? 0);
      const total = await sql<{ total: string }>`
        SELECT coalesce(sum(bytes), 0) AS total FROM store_users`.execute(trx);
      const totalBytes = Number(total.rows[0]?.total ?? 0);
      if (change > 0 && (userBytes.get(user) ?? 0) + change > this.#options.bounds.userMaxBytes) {
        return { outcome: { full: 'user' } as const };
      }
      if (change > 0 && totalBytes + change > this.#options.bounds.maxBytes) {
        return { outcome: { full: 'store' } as const };
      }
      await upsertReport(trx, report, names, bytes);
      await changeUsers(trx, new Map([[user, change]]));
      return { outcome: { stored: true } as const, totalBytes: totalBytes + change };
    });
    if (kept.totalBytes !== undefined) this.#options.counted(kept.totalBytes);
    return kept.outcome;
  }

  async reportNames(room: string, doc: string): Promise<string[] | undefined> {
    await this.#options.ready();
    const found = await sql<{ names: string[] | null }>`SELECT names FROM store_folder_reports
      WHERE room = ${room} AND doc = ${doc}`.execute(this.#options.db);
    return found.rows[0]?.names ?? undefined;
  }

  /**
   * Drops the chunks last used before `before` (ms), under their users' locks (taken before the
   * chunks' rows, as a put takes them); returns how many.
   */
  async dropUnused(before: number): Promise<number> {
    await this.settled();
    return this.#options.db.transaction().execute(async (trx) => {
      const users = await sql<{ user_id: string }>`SELECT DISTINCT user_id FROM store_chunks
        WHERE used_at < ${before}`.execute(trx);
      if (users.rows.length === 0) return 0;
      await lockUsers(
        trx,
        users.rows.map((row) => row.user_id),
      );
      const gone = await sql<{ user_id: string; bytes: string }>`DELETE FROM store_chunks
        WHERE used_at < ${before} RETURNING user_id, bytes`.execute(trx);
      await changeUsers(trx, freedPerUser(gone.rows));
      return gone.rows.length;
    });
  }

  /** Rooms that hold chunks or folder reports. */
  async rooms(): Promise<string[]> {
    const found = await sql<{ room: string }>`SELECT room FROM store_chunks
      UNION SELECT room FROM store_folder_reports`.execute(this.#options.db);
    return found.rows.map((row) => row.room);
  }

  /** Chunks and folder reports per room. */
  async usage(): Promise<Map<string, RoomChunks & { user: string }>> {
    const { db } = this.#options;
    const counts = await sql<{ room: string; chunks: number; bytes: string }>`
      SELECT room, count(*)::integer AS chunks, sum(bytes) AS bytes FROM store_chunks
      GROUP BY room`.execute(db);
    const reports = await sql<ReportRow>`SELECT room, doc, device, files, bytes, encrypted,
      coalesce(jsonb_array_length(names), 0) AS named, at, counted
      FROM store_folder_reports`.execute(db);
    return roomChunksOf(
      counts.rows.map((row) => ({ ...row, bytes: Number(row.bytes) })),
      reports.rows.map(reportOfRow),
    );
  }
}

/**
 * Deletes one user's chunks and folder reports matching `where` (on `room` or `user_id`);
 * returns the bytes they counted.
 */
export async function deleteChunksIn(
  trx: Transaction<StoreTables>,
  user: string,
  where: ReturnType<typeof sql>,
): Promise<number> {
  const reports = await sql<{ user_id: string; bytes: string }>`DELETE FROM store_folder_reports
    WHERE user_id = ${user} AND ${where} RETURNING user_id, counted AS bytes`.execute(trx);
  const gone = await sql<{ user_id: string; bytes: string }>`DELETE FROM store_chunks
    WHERE user_id = ${user} AND ${where} RETURNING user_id, bytes`.execute(trx);
  return -(freedPerUser([...reports.rows, ...gone.rows]).get(user) ?? 0);
}

/** The bytes freed per user, as negative changes. */
function freedPerUser(
  rows: ReadonlyArray<{ user_id: string; bytes: string }>,
): Map<string, number> {
  const freed = new Map<string, number>();
  for (const row of rows) freed.set(row.user_id, (freed.get(row.user_id) ?? 0) - Number(row.bytes));
  return freed;
}

/** Inserts a report, or replaces the room's report of the same folder document. */
async function upsertReport(
  trx: Transaction<StoreTables>,
  report: FolderReport,
  names: readonly string[] | undefined,
  counted: number,
): Promise<void> {
  const json = names === undefined ? null : JSON.stringify(names);
  await sql`INSERT INTO store_folder_reports
    (room, doc, user_id, device, files, bytes, encrypted, names, at, counted)
    VALUES (${report.room}, ${report.doc}, ${userOfRoom(report.room)}, ${report.device},
      ${report.files}, ${report.bytes}, ${report.encrypted}, ${json}::jsonb, ${report.at},
      ${counted})
    ON CONFLICT (room, doc) DO UPDATE SET device = excluded.device, files = excluded.files,
      bytes = excluded.bytes, encrypted = excluded.encrypted, names = excluded.names,
      at = excluded.at, counted = excluded.counted`.execute(trx);
}

/** A folder report's row as usage reads it (its names counted, not read). */
interface ReportRow {
  room: string;
  doc: string;
  device: string;
  files: string;
  bytes: string;
  encrypted: boolean;
  named: number;
  at: string;
  counted: string;
}

function reportOfRow(row: ReportRow): ReportSummary & { room: string; counted: number } {
  return {
    room: row.room,
    doc: row.doc,
    device: row.device,
    files: Number(row.files),
    bytes: Number(row.bytes),
    encrypted: row.encrypted,
    named: Number(row.named),
    at: Number(row.at),
    counted: Number(row.counted),
  };
}
