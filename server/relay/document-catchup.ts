import type { CatchupFrame, CaughtupFrame } from '../../protocol/relay-frames.ts';
import type { DocumentStore, StoredEntry } from '../store/document-store.ts';
import type { Connection } from './connection.ts';

/** What the store's side counts for `/metrics`. */
export interface DocumentCounts {
  appends: number;
  full: number;
  failed: number;
  catchUps: number;
  entriesSent: number;
  /** Catch-ups refused with `rate_limited`: their connection had `maxWaitingCatchUps` waiting. */
  catchUpsRefused: number;
  /** Catch-ups asked and not answered yet, on every connection (being answered or waiting). */
  catchUpsPending: number;
}

/**
 * Catch-ups one connection may have waiting behind the one being answered; one more is refused
 * with `rate_limited` (dropped). A device asks one per document it opens.
 */
export const maxWaitingCatchUps = 256;

/** What one catch-up works with. */
export interface CatchUpContext {
  conn: Connection;
  store: DocumentStore;
  counts: DocumentCounts;
  /** `message.maxBytes`: no page is larger. */
  maxMessageBytes: number;
  /** `relay.maxQueuedBytes`: a page waits while its receiver has half of it unsent. */
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

/** Waits a little; a page waits so while its receiver has much unsent. */
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** The end of this event-loop turn, when the relay writes out what it corked. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Whether the catch-up should stop: the connection closed, or left the room it asked in. */
export const gone = (conn: Connection, room: string) =>
  conn.queue.done || conn.room?.id !== room || conn.socket.readyState !== conn.socket.OPEN;

/**
 * Sends `frame` once it fits in half of the receiver's bound (or nothing is unsent), checked and
 * sent with no await between; false when the connection went first.
 */
async function sendWhenRoom(
  conn: Connection,
  room: string,
  frame: Buffer,
  maxQueuedBytes: number,
): Promise<boolean> {
  const queue = conn.queue;
  const half = maxQueuedBytes / 2;
  const full = () => queue.unsentBytes > 0 && queue.unsentBytes + frame.length > half;
  // first until the turn's corked writes are out (most often room enough), then a little longer
  for (let waits = 0; !gone(conn, room) && full(); waits++)
    await (waits === 0 ? nextTurn() : pause(10));
  if (gone(conn, room)) return false;
  queue.send(frame);
  return true;
}

/** The `caughtup` that ends a catch-up; with `kcs`, the room's key check values, when asked. */
async function caughtUp(
  store: DocumentStore,
  frame: CatchupFrame,
  room: string,
  lastPos: number,
): Promise<CaughtupFrame> {
  const done: CaughtupFrame = { type: 'caughtup', doc: frame.doc, pos: lastPos };
  if (frame.keys === true) done.kcs = await store.keyChecks(room);
  return done;
}

/**
 * Answers a `catchup`: `stored` pages from the newest snapshot on, then `caughtup`. At most one
 * read of the store (about a page) and one page are held at a time, counted in the relay's
 * unsent bytes (`setHeld`) until they are sent; each page waits for room at its receiver.
 */
export async function sendCatchUp(
  context: CatchUpContext,
  frame: CatchupFrame,
  room: string,
): Promise<void> {
  const { conn, store, counts, maxMessageBytes, maxQueuedBytes } = context;
  const docJson = JSON.stringify(frame.doc);
  const headBytes = pageFrame(docJson, []).length;
  let page: string[] = [];
  let pageBytes = headBytes;
  /** Data bytes read from the store and not in a page yet. */
  let unpaged = 0;
  const held = () => conn.queue.setHeld(unpaged + (page.length > 0 ? pageBytes : 0));
  const flush = async (): Promise<boolean> => {
    if (page.length === 0) return true;
    const bytes = pageFrame(docJson, page);
    const entries = page.length;
    page = [];
    pageBytes = headBytes;
    conn.queue.setHeld(unpaged + bytes.length);
    if (!(await sendWhenRoom(conn, room, bytes, maxQueuedBytes))) return false;
    counts.entriesSent += entries;
    held();
    return true;
  };
  const add = async (entry: StoredEntry): Promise<boolean> => {
    const json = entryJson(entry);
    unpaged -= entry.data.length;
    // In bytes: a document key, a device id or a kc may be beyond ASCII.
    const bytes = Buffer.byteLength(json) + 1;
    if (page.length > 0 && pageBytes + bytes > maxMessageBytes && !(await flush())) return false;
    page.push(json);
    pageBytes += bytes;
    held();
    return true;
  };
  /** Pages the entries read (`skip`: positions already sent), false once the connection went. */
  const addAll = async (entries: readonly StoredEntry[], skip?: Set<number>) => {
    unpaged = entries.reduce((sum, entry) => sum + entry.data.length, 0);
    held();
    for (const entry of entries) {
      if (skip?.has(entry.pos)) unpaged -= entry.data.length;
      else if (!(await add(entry))) return false;
    }
    return true;
  };
  try {
    let cursor = frame.after;
    const skip = new Set<number>();
    if (frame.snapshots !== false) {
      const snapshot = await store.newestSnapshot(room, frame.doc, frame.kc, frame.after);
      if (gone(conn, room) || !(await addAll(snapshot))) return;
      for (const piece of snapshot) skip.add(piece.pos);
      if (snapshot[0]?.covers !== undefined) cursor = snapshot[0].covers;
    }
    // Data read per step: about what one page carries once in base64.
    const readBytes = Math.max(1, Math.floor((maxMessageBytes * 3) / 4));
    for (;;) {
      if (gone(conn, room)) return;
      const { entries, lastPos } = await store.read(room, frame.doc, cursor, readBytes);
      if (entries.length === 0) {
        if (!(await flush())) return;
        const done = await caughtUp(store, frame, room, lastPos);
        await sendWhenRoom(conn, room, Buffer.from(JSON.stringify(done)), maxQueuedBytes);
        return;
      }
      if (!(await addAll(entries, skip))) return;
      cursor = (entries[entries.length - 1] as StoredEntry).pos;
    }
  } finally {
    conn.queue.setHeld(0);
  }
}

/** A catch-up asked, with the room it was asked in. */
interface Asked {
  frame: CatchupFrame;
  room: string;
}

/**
 * Each connection's catch-ups, answered one at a time in the order they were asked: a connection
 * that asks many at once holds one read and one page in the relay, not one per catch-up.
 */
export class CatchUpLines {
  readonly #waiting = new WeakMap<Connection, Asked[]>();
  readonly #counts: DocumentCounts;
  readonly #answer: (conn: Connection, asked: Asked) => Promise<void>;

  /** `answer`: answers one catch-up (its errors included); resolves, never rejects, once done. */
  constructor(counts: DocumentCounts, answer: (conn: Connection, asked: Asked) => Promise<void>) {
    this.#counts = counts;
    this.#answer = answer;
  }

  /**
   * Queues a catch-up of `conn` in its room; false when `maxWaitingCatchUps` already wait behind
   * the one being answered (the caller refuses it).
   */
  ask(conn: Connection, frame: CatchupFrame): boolean {
    const waiting = this.#waiting.get(conn);
    const asked = { frame, room: conn.room?.id as string };
    if (waiting !== undefined) {
      if (waiting.length >= maxWaitingCatchUps) return false;
      waiting.push(asked);
      this.#counts.catchUpsPending++;
      return true;
    }
    this.#waiting.set(conn, []);
    this.#counts.catchUpsPending++;
    void this.#run(conn, asked);
    return true;
  }

  async #run(conn: Connection, first: Asked): Promise<void> {
    const waiting = this.#waiting.get(conn) as Asked[];
    let next: Asked | undefined = first;
    while (next !== undefined) {
      if (!gone(conn, next.room)) await this.#answer(conn, next);
      this.#counts.catchUpsPending--;
      next = waiting.shift();
    }
    this.#waiting.delete(conn);
  }
}
