import { createHash } from 'node:crypto';
import { base64Length } from '../../protocol/base64.ts';
import type { RelayErrorCode } from '../../protocol/relay-codes.ts';
import type { AppendFrame, CatchupFrame } from '../../protocol/relay-frames.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore, NewEntry } from '../store/document-store.ts';
import type { Connection } from './connection.ts';
import {
  CatchUpLines,
  type DocumentCounts,
  entryJson,
  gone,
  maxWaitingCatchUps,
  pageFrame,
  sendCatchUp,
} from './document-catchup.ts';

export type { DocumentCounts };

import { dataOf, type WithDecoded } from './messages.ts';
import { countError, type RelayMetrics } from './metrics.ts';

/**
 * The relay's side of the document store (docs/store.md): `append` frames become entries, stored
 * and acknowledged with `appended` once durable; `catchup` frames are answered with `stored`
 * pages, each under `message.maxBytes`, and `caughtup`, one catch-up of a connection at a time
 * (`CatchUpLines`). Neither is routed nor buffered. A relay without a store (a cluster node
 * without `store.url`) answers both with `store_unavailable`.
 */
export interface DocumentFrames {
  append(conn: Connection, frame: WithDecoded<AppendFrame>): void;
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

/** Why a viewer's append or chunk put is refused. */
export const viewerRefusal = 'a viewer of this project reads only: nothing was stored';

export function sendStoreError(
  conn: Connection,
  metrics: RelayMetrics,
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

/** The store's lines on `/metrics`. */
function storeMetrics(store: DocumentStore | undefined, counts: DocumentCounts): string {
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
    '# HELP sync_host_store_catchups_pending Catch-ups asked and not answered yet (being answered or waiting).',
    '# TYPE sync_host_store_catchups_pending gauge',
    `sync_host_store_catchups_pending ${counts.catchUpsPending}`,
    `# HELP sync_host_store_catchups_refused_total Catch-ups refused (rate_limited): ${maxWaitingCatchUps} of their connection were waiting.`,
    '# TYPE sync_host_store_catchups_refused_total counter',
    `sync_host_store_catchups_refused_total ${counts.catchUpsRefused}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** The entry an `append` frame of `conn` asks to store. */
function entryOf(conn: Connection, frame: WithDecoded<AppendFrame>): NewEntry {
  return {
    room: conn.room?.id as string,
    doc: frame.doc,
    device: conn.deviceKey,
    data: dataOf(frame),
    kc: frame.kc,
    covers: frame.covers,
    part: frame.part,
    keep: frame.keep,
  };
}

/**
 * Why an entry cannot be stored, or undefined: a `kc` without the proof of its key, or a stored
 * form that does not fit one page (the client must send it in pieces), measured with empty data
 * and the widest position, plus its base64 (which JSON never escapes).
 */
function refusalOf(
  entry: NewEntry,
  frame: AppendFrame,
  maxMessageBytes: number,
  at: number,
): string | undefined {
  if (frame.kc !== undefined && !provesKeyCheck(frame.kc, frame.kp)) {
    return 'kc without the proof of its key (kp): the entry was not stored';
  }
  const widest = entryJson({ ...entry, data: Buffer.alloc(0), pos: Number.MAX_SAFE_INTEGER, at });
  const head = pageFrame(JSON.stringify(entry.doc), [widest]).length;
  if (head + base64Length(entry.data.length) <= maxMessageBytes) return undefined;
  return `data too large to be sent back in one page of message.maxBytes (${maxMessageBytes}): append it in pieces`;
}

/**
 * The handler of `catchup` frames: each connection's catch-ups answered one at a time, in order
 * (`CatchUpLines`); one asked while `maxWaitingCatchUps` wait is refused with `rate_limited`.
 */
function catchUpHandler(
  options: DocumentFramesOptions,
  counts: DocumentCounts,
): (conn: Connection, frame: CatchupFrame) => void {
  const { store, metrics, logger, maxMessageBytes, maxQueuedBytes } = options;
  const lines = new CatchUpLines(counts, async (conn, { frame, room }) => {
    counts.catchUps++;
    const context = {
      conn,
      store: store as DocumentStore,
      counts,
      maxMessageBytes,
      maxQueuedBytes,
    };
    await sendCatchUp(context, frame, room).catch((err: unknown) => {
      logger.error({ err }, 'document store read failed: catch-up not answered');
      const message = 'the host could not read the document: ask again later';
      if (!gone(conn, room)) sendStoreError(conn, metrics, 'store_unavailable', message, frame.doc);
    });
  });
  return (conn, frame) => {
    if (store === undefined) {
      const message = 'this relay keeps no documents';
      sendStoreError(conn, metrics, 'store_unavailable', message, frame.doc);
      return;
    }
    if (lines.ask(conn, frame)) return;
    counts.catchUpsRefused++;
    const message = `too many catch-ups waiting (${maxWaitingCatchUps}): this one was dropped, ask again once they are answered`;
    // a connection that does not read its socket gets no error frames, only silence
    if (!conn.queue.isBehind) sendStoreError(conn, metrics, 'rate_limited', message, frame.doc);
  };
}

/** Creates the handler of `append` and `catchup` frames over `store`; see `DocumentFrames`. */
export function createDocumentFrames(options: DocumentFramesOptions): DocumentFrames {
  const { store, metrics, logger, maxMessageBytes, now } = options;
  const counts: DocumentCounts = {
    ...{ appends: 0, full: 0, failed: 0, catchUps: 0, entriesSent: 0 },
    ...{ catchUpsRefused: 0, catchUpsPending: 0 },
  };
  let failing = false;
  /** Per connection, its latest append still unanswered (they are answered in order). */
  const unanswered = new WeakMap<Connection, Promise<void>>();

  const unavailable = (conn: Connection, doc: string, ref?: number) =>
    sendStoreError(conn, metrics, 'store_unavailable', 'this relay keeps no documents', doc, ref);

  function append(conn: Connection, frame: WithDecoded<AppendFrame>): void {
    if (store === undefined) {
      unavailable(conn, frame.doc, frame.ref);
      return;
    }
    if (conn.access.role === 'viewer') {
      sendStoreError(conn, metrics, 'forbidden', viewerRefusal, frame.doc, frame.ref);
      return;
    }
    const entry = entryOf(conn, frame);
    const refusal = refusalOf(entry, frame, maxMessageBytes, now());
    if (refusal !== undefined) {
      sendStoreError(conn, metrics, 'invalid_message', refusal, frame.doc, frame.ref);
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
        sendStoreError(conn, metrics, 'store_full', message, frame.doc, frame.ref);
      },
      (err: unknown) => {
        counts.failed++;
        if (!failing) logger.error({ err }, 'document store write failed: entries not stored');
        failing = true;
        const message = 'the host could not write the entry (not stored): send it again later';
        sendStoreError(conn, metrics, 'store_unavailable', message, frame.doc, frame.ref);
      },
    );
    unanswered.set(conn, answered);
    void answered.then(() => {
      if (unanswered.get(conn) === answered) unanswered.delete(conn);
    });
  }

  const catchUp = catchUpHandler(options, counts);

  return {
    append,
    catchUp,
    answered: (conn) => unanswered.get(conn),
    invalid: (conn, message, doc, ref) =>
      sendStoreError(conn, metrics, 'invalid_message', message, doc, ref),
    metrics: () => storeMetrics(store, counts),
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
