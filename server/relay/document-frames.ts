import { createHash } from 'node:crypto';
import type { RelayErrorCode } from '../../protocol/relay-codes.ts';
import type { AppendFrame, CatchupFrame } from '../../protocol/relay-frames.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore, NewEntry, StoredEntry } from '../store/document-store.ts';
import type { Connection } from './connection.ts';
import { countError, type RelayMetrics } from './metrics.ts';

/**
 * The relay's side of the document store (docs/store.md): `append` frames become entries, stored
 * and acknowledged with `appended` once durable; `catchup` frames are answered with `stored`
 * pages, each under `message.maxBytes`, and `caughtup`. Neither is routed nor buffered. A relay
 * without a store (a cluster node without `store.url`) answers both with `store_unavailable`.
 */
export interface DocumentFrames {
  append(conn: Connection, frame: AppendFrame): void;
  catchUp(conn: Connection, frame: CatchupFrame): void;
  /**
   * Resolves once every append this connection sent so far was answered (`appended` or an
   * error frame queued); undefined when none waits. A `pong` waits for it, so that an append
   * with no answer before the pong of a later ping was dropped (`rate_limited`).
   */
  answered(conn: Connection): Promise<void> | undefined;
  /** A malformed `append` or `catchup`: `invalid_message` naming its document and ref. */
  invalid(conn: Connection, message: string, doc?: string, ref?: number): void;
  /** Lines added to `/metrics`. */
  metrics(): string;
}

export interface DocumentFramesOptions {
  /** undefined: this relay keeps no documents. */
  store: DocumentStore | undefined;
  metrics: RelayMetrics;
  logger: Logger;
  /** `message.maxBytes`: no page is larger. */
  maxMessageBytes: number;
  /** `relay.maxQueuedBytes`: a catch-up waits while its receiver has half of it unsent. */
  maxQueuedBytes: number;
  now: () => number;
}

/** The `stored` frame of one page, from the entries' JSON texts. */
function pageFrame(docJson: string, entries: readonly string[]): Buffer {
  return Buffer.from(`{"type":"stored","doc":${docJson},"entries":[${entries.join(',')}]}`);
}

/** One entry as a page carries it. */
function entryJson(entry: StoredEntry): string {
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

/** Creates the handler of `append` and `catchup` frames over `store`; see `DocumentFrames`. */
export function createDocumentFrames(options: DocumentFramesOptions): DocumentFrames {
  const { store, metrics, logger, maxMessageBytes, maxQueuedBytes, now } = options;
  const counts = { appends: 0, full: 0, failed: 0, catchUps: 0, entriesSent: 0 };
  let failing = false;
  /** Per connection, its latest append still unanswered (they are answered in order). */
  const unanswered = new WeakMap<Connection, Promise<void>>();

  function sendStoreError(
    conn: Connection,
    code: RelayErrorCode,
    message: string,
    doc: string | undefined,
    ref?: number,
  ): void {
    countError(metrics, code);
    const frame = {
      type: 'error',
      code,
      message,
      ...(doc === undefined ? {} : { doc }),
      ...(ref === undefined ? {} : { ref }),
    };
    conn.queue.send(Buffer.from(JSON.stringify(frame)));
  }

  const unavailable = (conn: Connection, doc: string, ref?: number) =>
    sendStoreError(conn, 'store_unavailable', 'this relay keeps no documents', doc, ref);

  /**
   * Whether the stored form of an entry fits one page (else the client must send it in pieces):
   * measured with empty data and the widest position, plus its base64 (which JSON never escapes).
   */
  function fitsOnePage(entry: NewEntry, base64Length: number): boolean {
    const widest = entryJson({
      ...entry,
      data: Buffer.alloc(0),
      pos: Number.MAX_SAFE_INTEGER,
      at: now(),
    });
    const head = pageFrame(JSON.stringify(entry.doc), [widest]).length;
    return head + base64Length <= maxMessageBytes;
  }

  function append(conn: Connection, frame: AppendFrame): void {
    if (store === undefined) {
      unavailable(conn, frame.doc, frame.ref);
      return;
    }
    if (frame.kc !== undefined && !provesKeyCheck(frame.kc, frame.kp)) {
      const message = 'kc without the proof of its key (kp): the entry was not stored';
      sendStoreError(conn, 'invalid_message', message, frame.doc, frame.ref);
      return;
    }
    const room = conn.room?.id as string;
    const entry: NewEntry = {
      room,
      doc: frame.doc,
      device: conn.deviceKey,
      data: Buffer.from(frame.data, 'base64'),
      kc: frame.kc,
      covers: frame.covers,
      part: frame.part,
      keep: frame.keep,
    };
    if (!fitsOnePage(entry, frame.data.length)) {
      const message = `data too large to be sent back in one page of message.maxBytes (${maxMessageBytes}): append it in pieces`;
      sendStoreError(conn, 'invalid_message', message, frame.doc, frame.ref);
      return;
    }
    const answered = store.append(entry).then(
      (outcome) => {
        if (failing) logger.info('document store writes succeed again');
        failing = false;
        if ('pos' in outcome) {
          counts.appends++;
          const acked = { type: 'appended', doc: frame.doc, ref: frame.ref, pos: outcome.pos };
          conn.queue.send(Buffer.from(JSON.stringify(acked)));
          return;
        }
        counts.full++;
        const bound = outcome.full === 'user' ? 'store.userMaxBytes' : 'store.maxBytes';
        const message = `the host's document store is full (${bound}): the entry was not stored`;
        sendStoreError(conn, 'store_full', message, frame.doc, frame.ref);
      },
      (err: unknown) => {
        counts.failed++;
        if (!failing) logger.error({ err }, 'document store write failed: entries not stored');
        failing = true;
        const message = 'the host could not write the entry (not stored): send it again later';
        sendStoreError(conn, 'store_unavailable', message, frame.doc, frame.ref);
      },
    );
    unanswered.set(conn, answered);
    void answered.then(() => {
      if (unanswered.get(conn) === answered) unanswered.delete(conn);
    });
  }

  /** Whether the catch-up should stop: the connection closed, or left the room it asked in. */
  const gone = (conn: Connection, room: string) =>
    conn.queue.done || conn.room?.id !== room || conn.socket.readyState !== conn.socket.OPEN;

  /** Waits while the receiver has much unsent, so that a long catch-up never trips its bound. */
  async function roomToSend(conn: Connection, room: string): Promise<void> {
    await nextTurn();
    while (!gone(conn, room) && conn.queue.unsentBytes > maxQueuedBytes / 2) await pause(10);
  }

  async function sendCatchUp(
    conn: Connection,
    store: DocumentStore,
    frame: CatchupFrame,
  ): Promise<void> {
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
      await roomToSend(conn, room);
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

  function catchUp(conn: Connection, frame: CatchupFrame): void {
    if (store === undefined) {
      unavailable(conn, frame.doc);
      return;
    }
    counts.catchUps++;
    sendCatchUp(conn, store, frame).catch((err: unknown) => {
      logger.error({ err }, 'document store read failed: catch-up not answered');
      const message = 'the host could not read the document: ask again later';
      if (!gone(conn, conn.room?.id ?? '')) {
        sendStoreError(conn, 'store_unavailable', message, frame.doc);
      }
    });
  }

  function renderMetrics(): string {
    if (store === undefined) return '';
    const lines = [
      '# HELP sync_host_store_bytes Bytes kept by the document store (counted against store.maxBytes).',
      '# TYPE sync_host_store_bytes gauge',
      `sync_host_store_bytes ${store.bytes()}`,
      '# HELP sync_host_store_appends_total Entries stored.',
      '# TYPE sync_host_store_appends_total counter',
      `sync_host_store_appends_total ${counts.appends}`,
      '# HELP sync_host_store_refused_total Appends refused.',
      '# TYPE sync_host_store_refused_total counter',
      `sync_host_store_refused_total{reason="full"} ${counts.full}`,
      `sync_host_store_refused_total{reason="write_failed"} ${counts.failed}`,
      '# HELP sync_host_store_catchups_total Catch-ups answered.',
      '# TYPE sync_host_store_catchups_total counter',
      `sync_host_store_catchups_total ${counts.catchUps}`,
      '# HELP sync_host_store_entries_sent_total Entries sent in catch-ups.',
      '# TYPE sync_host_store_entries_sent_total counter',
      `sync_host_store_entries_sent_total ${counts.entriesSent}`,
    ];
    return `${lines.join('\n')}\n`;
  }

  return {
    append,
    catchUp,
    answered: (conn) => unanswered.get(conn),
    invalid: (conn, message, doc, ref) =>
      sendStoreError(conn, 'invalid_message', message, doc, ref),
    metrics: renderMetrics,
  };
}

/**
 * Whether `proof` (base64url) is the store proof of the key whose check value is `check`: the
 * check value is the start of the proof's SHA-256 in hex. A device learns other keys' check
 * values from the messages it receives, never their proofs (sent to the host only).
 */
export function provesKeyCheck(check: string, proof: string | undefined): boolean {
  if (proof === undefined || !/^[A-Za-z0-9_-]{43}$/.test(proof)) return false;
  const digest = createHash('sha256').update(Buffer.from(proof, 'base64url')).digest('hex');
  return check.length === 16 && digest.startsWith(check);
}
