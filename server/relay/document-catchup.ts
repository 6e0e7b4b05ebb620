import type { CatchupFrame } from '../../protocol/relay-frames.ts';
import type { DocumentStore, StoredEntry } from '../store/document-store.ts';
import type { Connection } from './connection.ts';

/** What the store's side counts for `/metrics`. */
export interface DocumentCounts {
  appends: number;
  full: number;
  failed: number;
  catchUps: number;
  entriesSent: number;
}

/** What one catch-up works with. */
export interface CatchUpContext {
  conn: Connection;
  store: DocumentStore;
  counts: DocumentCounts;
  /** `message.maxBytes`: no page is larger. */
  maxMessageBytes: number;
  /** `relay.maxQueuedBytes`: a catch-up waits while its receiver has half of it unsent. */
  maxQueuedBytes: number;
}

/** The `stored` frame of one page, from the entries' JSON texts. */
export function pageFrame(docJson: string, entries: readonly string[]): Buffer {
  return Buffer.from(`{"type":"stored","doc":${docJson},"entries":[${entries.join(',')}]}`);
}

/** One entry as a page carries it. */
export function entryJson(entry: StoredEntry): string {
  return JSON.stringify({
    pos: entry.pos,
    at: entry.at,
    from: entry.device,
    data: entry.data.toString('base64'),
    ...(entry.kc === undefined ? {} : { kc: entry.kc }),
    ...(entry.covers === undefined ? {} : { covers: entry.covers }),
    ...(entry.part === undefined ? {} : { part: entry.part }),
    ...(entry.keep === true ? { keep: true } : {}),
  });
}

/** Waits a little; a catch-up pauses so while its receiver has much unsent. */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Whether the catch-up should stop: the connection closed, or left the room it asked in. */
export const gone = (conn: Connection, room: string) =>
  conn.queue.done || conn.room?.id !== room || conn.socket.readyState !== conn.socket.OPEN;

/** Waits while the receiver has much unsent, so that a long catch-up never trips its bound. */
async function roomToSend(conn: Connection, room: string, maxQueuedBytes: number): Promise<void> {
  await nextTurn();
  while (!gone(conn, room) && conn.queue.unsentBytes > maxQueuedBytes / 2) await pause(10);
}

/** Answers a `catchup`: `stored` pages from the newest snapshot on, then `caughtup`. */
export async function sendCatchUp(context: CatchUpContext, frame: CatchupFrame): Promise<void> {
  const { conn, store, counts, maxMessageBytes, maxQueuedBytes } = context;
  const room = conn.room?.id as string;
  const docJson = JSON.stringify(frame.doc);
  const headBytes = pageFrame(docJson, []).length;
  let page: string[] = [];
  let pageBytes = headBytes;
  const flush = async () => {
    if (page.length === 0) return;
    conn.queue.send(pageFrame(docJson, page));
    counts.entriesSent += page.length;
    page = [];
    pageBytes = headBytes;
    await roomToSend(conn, room, maxQueuedBytes);
  };
  const add = async (entry: StoredEntry) => {
    const json = entryJson(entry);
    // In bytes: a document key, a device id or a kc may be beyond ASCII.
    const bytes = Buffer.byteLength(json) + 1;
    if (page.length > 0 && pageBytes + bytes > maxMessageBytes) await flush();
    page.push(json);
    pageBytes += bytes;
  };
  let cursor = frame.after;
  const skip = new Set<number>();
  if (frame.snapshots !== false) {
    const snapshot = await store.newestSnapshot(room, frame.doc, frame.kc, frame.after);
    for (const piece of snapshot) {
      await add(piece);
      skip.add(piece.pos);
    }
    if (snapshot[0]?.covers !== undefined) cursor = snapshot[0].covers;
  }
  // Data read per step: about what one page carries once in base64.
  const readBytes = Math.max(1, Math.floor((maxMessageBytes * 3) / 4));
  for (;;) {
    if (gone(conn, room)) return;
    const { entries, lastPos } = await store.read(room, frame.doc, cursor, readBytes);
    if (entries.length === 0) {
      await flush();
      if (gone(conn, room)) return;
      const done = { type: 'caughtup', doc: frame.doc, pos: lastPos };
      conn.queue.send(Buffer.from(JSON.stringify(done)));
      return;
    }
    for (const entry of entries) if (!skip.has(entry.pos)) await add(entry);
    cursor = (entries[entries.length - 1] as StoredEntry).pos;
  }
}
