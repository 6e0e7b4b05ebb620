import { type Kysely, sql, type Transaction } from 'kysely';
import { userOfRoom } from '../../protocol/room-id.ts';
import {
  type AppendOutcome,
  entryBytes,
  type NewEntry,
  type StoreBounds,
} from './document-store.ts';
import type { StoreTables } from './postgres-schema.ts';

/** Rows per INSERT: well below PostgreSQL's 65,535 bound parameters (10 per row). */
const rowsPerInsert = 1_000;

/** What a batch committed: each append's outcome, and the store's bytes as the batch left them. */
export interface CommittedBatch {
  outcomes: AppendOutcome[];
  totalBytes: number;
}

/**
 * Stores a batch of appends in ONE transaction (docs/store.md, "The cluster store"): the users'
 * rows, then the documents' rows are locked in one order on every node (sorted), so that two
 * nodes' batches wait for each other instead of deadlocking; positions follow each document's
 * `last_pos` under its lock. An append past a bound is refused, the others are stored.
 */
export async function commitBatch(
  db: Kysely<StoreTables>,
  entries: readonly NewEntry[],
  bounds: StoreBounds,
  at: number,
): Promise<CommittedBatch> {
  return db.transaction().execute(async (trx) => {
    const users = [...new Set(entries.map((e) => userOfRoom(e.room)))];
    const userBytes = await lockUsers(trx, users);
    const total = await sql<{ total: string }>`
      SELECT coalesce(sum(bytes), 0) AS total FROM store_users`.execute(trx);
    let totalBytes = Number(total.rows[0]?.total ?? 0);
    const outcomes: Array<AppendOutcome | undefined> = entries.map((entry) => {
      const user = userOfRoom(entry.room);
      const bytes = entryBytes(entry);
      const before = userBytes.get(user) ?? 0;
      if (before + bytes > bounds.userMaxBytes) return { full: 'user' };
      if (totalBytes + bytes > bounds.maxBytes) return { full: 'store' };
      userBytes.set(user, before + bytes);
      totalBytes += bytes;
      return undefined;
    });
    const accepted = entries.filter((_, i) => outcomes[i] === undefined);
    const documents = await lockDocuments(trx, accepted);
    const rows: Array<StoreTables['store_entries']> = [];
    const added = new Map<number, { lastPos: number; bytes: number }>();
    entries.forEach((entry, i) => {
      if (outcomes[i] !== undefined) return;
      const document = documents.get(documentKey(entry)) as { id: number; lastPos: number };
      document.lastPos += 1;
      const bytes = entryBytes(entry);
      const sums = added.get(document.id) ?? { lastPos: 0, bytes: 0 };
      added.set(document.id, { lastPos: document.lastPos, bytes: sums.bytes + bytes });
      outcomes[i] = { pos: document.lastPos };
      rows.push({
        document: document.id,
        pos: document.lastPos,
        at,
        device: entry.device,
        kc: entry.kc ?? null,
        covers: entry.covers ?? null,
        part: entry.part === undefined ? null : JSON.stringify(entry.part),
        keep: entry.keep === true,
        bytes,
        data: entry.data,
      });
    });
    for (let i = 0; i < rows.length; i += rowsPerInsert) {
      await trx
        .insertInto('store_entries')
        .values(rows.slice(i, i + rowsPerInsert))
        .execute();
    }
    await addToDocuments(trx, added);
    await addToUsers(trx, accepted);
    return { outcomes: outcomes as AppendOutcome[], totalBytes };
  });
}

const documentKey = (entry: { room: string; doc: string }) => `${entry.room}\u0000${entry.doc}`;

/** Locks the users' rows (creating the missing ones), in one order; their bytes. */
export async function lockUsers(
  trx: Transaction<StoreTables>,
  users: readonly string[],
): Promise<Map<string, number>> {
  const sorted = [...users].sort();
  await sql`INSERT INTO store_users (user_id) SELECT unnest(${sorted}::text[]) AS u ORDER BY u
    ON CONFLICT DO NOTHING`.execute(trx);
  const locked = await sql<{ user_id: string; bytes: string }>`
    SELECT user_id, bytes FROM store_users WHERE user_id = ANY(${sorted}::text[])
    ORDER BY user_id COLLATE "C" FOR UPDATE`.execute(trx);
  return new Map(locked.rows.map((row) => [row.user_id, Number(row.bytes)]));
}

/** Locks the documents' rows (creating the missing ones), in one order; ids and last positions by key. */
async function lockDocuments(
  trx: Transaction<StoreTables>,
  entries: readonly NewEntry[],
): Promise<Map<string, { id: number; lastPos: number }>> {
  const found = new Map<string, { id: number; lastPos: number }>();
  if (entries.length === 0) return found;
  const keys = new Map(entries.map((e) => [documentKey(e), e]));
  const rooms = [...keys.values()].map((e) => e.room);
  const docs = [...keys.values()].map((e) => e.doc);
  const users = rooms.map(userOfRoom);
  await sql`INSERT INTO store_documents (room, doc, user_id)
    SELECT * FROM unnest(${rooms}::text[], ${docs}::text[], ${users}::text[]) AS d(room, doc, u)
    ORDER BY room COLLATE "C", doc COLLATE "C"
    ON CONFLICT DO NOTHING`.execute(trx);
  const locked = await sql<{ id: string; room: string; doc: string; last_pos: string }>`
    SELECT id, room, doc, last_pos FROM store_documents
    WHERE (room, doc) IN (SELECT * FROM unnest(${rooms}::text[], ${docs}::text[]))
    ORDER BY room COLLATE "C", doc COLLATE "C" FOR UPDATE`.execute(trx);
  for (const row of locked.rows) {
    found.set(documentKey(row), { id: Number(row.id), lastPos: Number(row.last_pos) });
  }
  return found;
}

async function addToDocuments(
  trx: Transaction<StoreTables>,
  added: Map<number, { lastPos: number; bytes: number }>,
): Promise<void> {
  if (added.size === 0) return;
  const ids = [...added.keys()];
  const lastPositions = ids.map((id) => added.get(id)?.lastPos ?? 0);
  const bytes = ids.map((id) => added.get(id)?.bytes ?? 0);
  await sql`UPDATE store_documents d SET last_pos = u.last_pos, bytes = d.bytes + u.bytes
    FROM unnest(${ids}::bigint[], ${lastPositions}::bigint[], ${bytes}::bigint[])
      AS u(id, last_pos, bytes)
    WHERE d.id = u.id`.execute(trx);
}

async function addToUsers(trx: Transaction<StoreTables>, accepted: readonly NewEntry[]) {
  const perUser = new Map<string, number>();
  for (const entry of accepted) {
    const user = userOfRoom(entry.room);
    perUser.set(user, (perUser.get(user) ?? 0) + entryBytes(entry));
  }
  await changeUsers(trx, perUser);
}

/** Adds `bytes` (negative: frees) to each user's count; the rows are locked already. */
export async function changeUsers(
  trx: Transaction<StoreTables>,
  perUser: Map<string, number>,
): Promise<void> {
  if (perUser.size === 0) return;
  const users = [...perUser.keys()];
  const bytes = users.map((user) => perUser.get(user) ?? 0);
  await sql`UPDATE store_users s SET bytes = s.bytes + u.bytes
    FROM unnest(${users}::text[], ${bytes}::bigint[]) AS u(user_id, bytes)
    WHERE s.user_id = u.user_id`.execute(trx);
}
