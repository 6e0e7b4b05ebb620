import { webcrypto } from 'node:crypto';
import { base64Length, writeBase64 } from '../../protocol/base64.ts';
import type { RelayErrorCode } from '../../protocol/relay-codes.ts';
import {
  type ChunkBadFrame,
  type ChunkGetFrame,
  type ChunkHaveFrame,
  type ChunkPutFrame,
  encodeBinaryFrame,
  type FolderReportFrame,
  maxReportBytes,
  maxReportsPerRoom,
} from '../../protocol/relay-frames.ts';
import type { Logger } from '../log.ts';
import type { ChunkStore } from '../store/chunk-store.ts';
import type { Connection } from './connection.ts';
import { provesKeyCheck, viewerRefusal } from './document-frames.ts';
import { dataOf, type WithDecoded } from './messages.ts';
import { countError, type RelayMetrics } from './metrics.ts';

/**
 * The relay's side of the chunk store (docs/store.md, "Chunks"): `chunk-put` answered
 * `chunk-stored` once the chunk is durable, `chunk-have` with `chunk-held`, `chunk-get` with
 * `chunk` or `chunk_missing`, `chunk-bad` with `chunk-dropped` (and `chunks-lost` to the room's
 * devices present, on every node), `folder-report` kept without an answer. None is routed nor buffered. A relay
 * without a store answers them with `store_unavailable`.
 */
export interface ChunkFrames {
  /**
   * `binary`: the put came as a binary frame; this connection's `chunk` answers are binary from
   * then on (unless a `chunk-get` says `"binary":false`).
   */
  put(conn: Connection, frame: WithDecoded<ChunkPutFrame>, binary?: boolean): void;
  have(conn: Connection, frame: ChunkHaveFrame): void;
  get(conn: Connection, frame: ChunkGetFrame): void;
  bad(conn: Connection, frame: ChunkBadFrame): void;
  report(conn: Connection, frame: FolderReportFrame): void;
  /**
   * Resolves once every chunk frame this connection sent so far was answered; undefined when
   * none waits. A `pong` waits for it, as for appends.
   */
  answered(conn: Connection): Promise<void> | undefined;
  /** A malformed chunk frame: `invalid_message` naming its ref and id. */
  invalid(conn: Connection, message: string, ref?: number, id?: string): void;
  /** Lines added to `/metrics`. */
  metrics(): string;
}

export interface ChunkFramesOptions {
  /** undefined: this relay keeps no documents nor chunks. */
  store: ChunkStore | undefined;
  metrics: RelayMetrics;
  logger: Logger;
  now: () => number;
  /**
   * `relay.maxQueuedBytes`: a `chunk` answer waits while its receiver has half of it unsent, so
   * that many `chunk-get` at once never close a receiver that reads (1013).
   */
  maxQueuedBytes: number;
}

/**
 * The largest chunk kept, in bytes as sent: 256 KiB of plaintext and room for its sealing. A
 * client's chunks are smaller when its connection's `message.maxBytes` is.
 */
export const maxChunkBytes = 256 * 1024 + 1024;

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The id of an unencrypted chunk: `"s"` + base64url of the SHA-256 of its bytes. Hashed on the
 * thread pool (WebCrypto), not on the relay's thread: while a device uploads a large file, the
 * relay's thread is the busiest part of the path, and the hash was a fifth of its time.
 */
export async function plainChunkId(data: Buffer): Promise<string> {
  const digest = await webcrypto.subtle.digest('SHA-256', data);
  return `s${Buffer.from(digest).toString('base64url')}`;
}

/** The message of a refused folder report, by the bound it passed. */
const reportRefusal = {
  user: "the host's store is full (store.userMaxBytes): the folder report was not kept",
  store: "the host's store is full (store.maxBytes): the folder report was not kept",
  size: `a folder report counts at most ${maxReportBytes} bytes (send fewer names): it was not kept`,
  reports: `the host keeps the reports of at most ${maxReportsPerRoom} folders of a project: this one was not kept`,
} as const;

/** Why a put is refused before the store sees it, or undefined. */
async function refusal(frame: ChunkPutFrame, data: Buffer): Promise<string | undefined> {
  if (data.length > maxChunkBytes) return `a chunk holds at most ${maxChunkBytes} bytes`;
  if (frame.kc !== undefined) {
    if (!provesKeyCheck(frame.kc, frame.kp)) {
      return 'kc without the proof of its key (kp): the chunk was not stored';
    }
    if (!frame.id.startsWith('h')) return 'an encrypted chunk has an id beginning with "h"';
    return undefined;
  }
  if (frame.id !== (await plainChunkId(data))) {
    return 'id is not "s" + the SHA-256 of the data (base64url): the chunk was not stored';
  }
  return undefined;
}

/**
 * Drops a chunk a device found damaged. Unencrypted, only when its bytes do not hash to its id
 * (a report about a good chunk changes nothing), and only that damaged copy; sealed, the host
 * cannot check it: the caller checked the key's proof.
 */
async function dropIfDamaged(
  chunks: ChunkStore,
  room: string,
  kc: string,
  id: string,
): Promise<boolean> {
  if (kc !== '') return chunks.drop(room, kc, id);
  const data = await chunks.get(room, kc, id);
  if (data === undefined || (await plainChunkId(data)) === id) return false;
  return chunks.drop(room, kc, id, data);
}

/**
 * The `chunk` answer, written straight into one buffer (all of it ASCII: the ref is a number,
 * the id was checked as base64url): half the time of `Buffer.from` over a string of it all.
 */
export function chunkAnswer(ref: number, id: string, data: Buffer): Buffer {
  const head = `{"type":"chunk","ref":${ref},"id":"${id}","data":"`;
  const answer = Buffer.allocUnsafe(head.length + base64Length(data.length) + 2);
  const at = writeBase64(answer, answer.write(head, 0, 'latin1'), data);
  answer.write('"}', at, 'latin1');
  return answer;
}

/** The `chunk` answer in the binary form (protocol/relay-frames.ts, `encodeBinaryFrame`). */
export function binaryChunkAnswer(ref: number, id: string, data: Buffer): Buffer {
  const frame = encodeBinaryFrame({ type: 'chunk', ref, id }, data);
  return Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
}

const send = (conn: Connection, frame: object) =>
  conn.queue.send(Buffer.from(JSON.stringify(frame)));

/** The chunk frames' handler; see `ChunkFrames`. */
class RelayChunkFrames implements ChunkFrames {
  readonly #options: ChunkFramesOptions;
  readonly #counts = {
    ...{ stored: 0, already: 0, full: 0, failed: 0, missing: 0, dropped: 0 },
    ...{ received: 0, receivedBytes: 0, sent: 0, sentBytes: 0, reportsRefused: 0 },
    ...{ binaryReceived: 0, binarySent: 0 },
  };
  #failing = false;
  /** Per connection, its chunk frames not answered yet. */
  readonly #unanswered = new WeakMap<Connection, Set<Promise<void>>>();
  /** Per connection, the puts whose id is being checked (see `put`). */
  readonly #checking = new WeakMap<Connection, Promise<void>>();
  /** The connections that sent a binary `chunk-put`: answered in binary `chunk` frames. */
  readonly #binary = new WeakSet<Connection>();

  constructor(options: ChunkFramesOptions) {
    this.#options = options;
  }

  #sendError(
    conn: Connection,
    code: RelayErrorCode,
    message: string,
    ref: number | undefined,
    id?: string,
  ): void {
    countError(this.#options.metrics, code);
    const frame = {
      type: 'error',
      code,
      message,
      ...(ref === undefined ? {} : { ref }),
      ...(id === undefined ? {} : { id }),
    };
    conn.queue.send(Buffer.from(JSON.stringify(frame)));
  }

  /**
   * Sends `frame` once it fits in half of the receiver's bound (or nothing is unsent): checked
   * and sent with no await between, so answers waking together do not all pass one check.
   */
  async #sendWhenRoom(conn: Connection, frame: Buffer, binary: boolean): Promise<void> {
    const queue = conn.queue;
    const half = this.#options.maxQueuedBytes / 2;
    const full = () => queue.unsentBytes > 0 && queue.unsentBytes + frame.length > half;
    const open = () => !queue.done && conn.socket.readyState === conn.socket.OPEN;
    while (open() && full()) await pause(10);
    if (binary) queue.sendBinary(frame);
    else queue.send(frame);
  }

  /** Tracks an answer so that a later `pong` waits for it. */
  #track(conn: Connection, answer: Promise<void>): void {
    let pending = this.#unanswered.get(conn);
    if (pending === undefined) {
      pending = new Set();
      this.#unanswered.set(conn, pending);
    }
    pending.add(answer);
    void answer.then(() => pending.delete(answer));
  }

  /** Runs `work` against the store, or answers `store_unavailable` (no store, a failed read). */
  #withStore(
    conn: Connection,
    frame: { ref: number; id?: string },
    work: (store: ChunkStore, room: string) => Promise<void>,
  ): Promise<void> {
    const { store, logger } = this.#options;
    if (store === undefined) {
      this.#sendError(conn, 'store_unavailable', 'this relay keeps no chunks', frame.ref, frame.id);
      return Promise.resolve();
    }
    const answer = work(store, conn.room?.id as string).then(
      () => {
        if (this.#failing) logger.info('chunk store works again');
        this.#failing = false;
      },
      (err: unknown) => {
        this.#counts.failed++;
        if (!this.#failing) logger.error({ err }, 'chunk store failed: chunk frames refused');
        this.#failing = true;
        const message = 'the host could not use its chunk store: send it again later';
        this.#sendError(conn, 'store_unavailable', message, frame.ref, frame.id);
      },
    );
    this.#track(conn, answer);
    return answer;
  }

  /** `#withStore` once the puts this connection sent before it were checked (see `put`). */
  #afterPuts(
    conn: Connection,
    frame: { ref: number; id?: string },
    work: (store: ChunkStore, room: string) => Promise<void>,
  ): void {
    const before = this.#checking.get(conn);
    if (before === undefined) void this.#withStore(conn, frame, work);
    else
      this.#track(
        conn,
        before.then(() => this.#withStore(conn, frame, work)),
      );
  }

  put(conn: Connection, frame: WithDecoded<ChunkPutFrame>, binary = false): void {
    if (binary) {
      this.#binary.add(conn);
      this.#counts.binaryReceived++;
    }
    if (conn.access.role === 'viewer') {
      this.#sendError(conn, 'forbidden', viewerRefusal, frame.ref, frame.id);
      return;
    }
    const data = dataOf(frame);
    const counts = this.#counts;
    counts.received++;
    counts.receivedBytes += data.length;
    const why = refusal(frame, data).catch(() => 'the chunk could not be checked: send it again');
    const checked = why.then((refused) => {
      if (refused !== undefined) {
        this.#sendError(conn, 'invalid_message', refused, frame.ref, frame.id);
        return;
      }
      return this.#withStore(conn, frame, async (chunks, room) => {
        const outcome = await chunks.put({ room, kc: frame.kc ?? '', id: frame.id, data });
        if ('stored' in outcome) {
          if (outcome.already) counts.already++;
          else counts.stored++;
          send(conn, { type: 'chunk-stored', ref: frame.ref, id: frame.id });
          return;
        }
        counts.full++;
        const bound = outcome.full === 'user' ? 'store.userMaxBytes' : 'store.maxBytes';
        const message = `the host's store is full (${bound}): the chunk was not stored`;
        this.#sendError(conn, 'store_full', message, frame.ref, frame.id);
      });
    });
    this.#track(conn, checked);
    // The connection's later chunk frames wait for this check: a put then a get or have of the
    // same chunk on one connection finds it, as when the check was synchronous.
    const chained = Promise.all([this.#checking.get(conn), checked]).then(() => {});
    this.#checking.set(conn, chained);
    void chained.then(() => {
      if (this.#checking.get(conn) === chained) this.#checking.delete(conn);
    });
  }

  have(conn: Connection, frame: ChunkHaveFrame): void {
    this.#afterPuts(conn, frame, async (chunks, room) => {
      const ids = await chunks.have(room, frame.kc ?? '', frame.ids);
      send(conn, { type: 'chunk-held', ref: frame.ref, ids });
    });
  }

  get(conn: Connection, frame: ChunkGetFrame): void {
    this.#afterPuts(conn, frame, async (chunks, room) => {
      const data = await chunks.get(room, frame.kc ?? '', frame.id);
      if (data === undefined) {
        this.#counts.missing++;
        const message = 'the host holds no chunk with that id under that kc';
        this.#sendError(conn, 'chunk_missing', message, frame.ref, frame.id);
        return;
      }
      const binary = frame.binary ?? this.#binary.has(conn);
      const answer = (binary ? binaryChunkAnswer : chunkAnswer)(frame.ref, frame.id, data);
      this.#counts.sent++;
      if (binary) this.#counts.binarySent++;
      this.#counts.sentBytes += data.length;
      await this.#sendWhenRoom(conn, answer, binary);
    });
  }

  bad(conn: Connection, frame: ChunkBadFrame): void {
    // The host cannot check a sealed chunk: only a holder of its key may have it dropped.
    if (frame.kc !== undefined && !provesKeyCheck(frame.kc, frame.kp)) {
      const message = 'kc without the proof of its key (kp): no chunk was dropped';
      this.#sendError(conn, 'invalid_message', message, frame.ref);
      return;
    }
    const here = conn.room;
    this.#afterPuts(conn, frame, async (chunks, room) => {
      const kc = frame.kc ?? '';
      const dropped: string[] = [];
      for (const id of new Set(frame.ids)) {
        if (await dropIfDamaged(chunks, room, kc, id)) dropped.push(id);
      }
      send(conn, { type: 'chunk-dropped', ref: frame.ref, ids: dropped });
      if (dropped.length === 0) return;
      this.#counts.dropped += dropped.length;
      this.#options.logger.warn({ room, kc, ids: dropped }, 'damaged chunks dropped');
      // The room's devices whose files name them put them again now, not at their next pass.
      here?.tellPresent({ type: 'chunks-lost', ids: dropped, ...(kc === '' ? {} : { kc }) });
    });
  }

  /**
   * Keeps a folder report; one refused (a bound, its size, the room's number of folders) is
   * answered `store_full` with neither `doc` nor `ref` (it answers no append and no chunk), and
   * changes nothing. A later `pong` waits for it, as for the other chunk frames. A viewer's
   * report is dropped without an answer: it would stand for the folder of the project's owner,
   * against whose bounds it counts.
   */
  report(conn: Connection, frame: FolderReportFrame): void {
    const { store, logger, now } = this.#options;
    if (store === undefined || conn.access.role === 'viewer') return;
    const kept = {
      room: conn.room?.id as string,
      doc: frame.doc,
      device: conn.deviceKey,
      files: frame.files,
      bytes: frame.bytes,
      encrypted: frame.encrypted,
      // The host keeps no file name of an encrypted project, whatever a device sends.
      names: frame.encrypted ? undefined : frame.names,
      at: now(),
    };
    const answer = store.report(kept).then(
      (outcome) => {
        if ('stored' in outcome) return;
        this.#counts.reportsRefused++;
        this.#sendError(conn, 'store_full', reportRefusal[outcome.full], undefined);
      },
      (err: unknown) => {
        logger.warn({ err }, 'chunk store: a folder report was not kept');
      },
    );
    this.#track(conn, answer);
  }

  answered(conn: Connection): Promise<void> | undefined {
    const pending = this.#unanswered.get(conn);
    if (pending === undefined || pending.size === 0) return undefined;
    return Promise.all(pending).then(() => undefined);
  }

  invalid(conn: Connection, message: string, ref?: number, id?: string): void {
    this.#sendError(conn, 'invalid_message', message, ref, id);
  }

  metrics(): string {
    const { store } = this.#options;
    if (store === undefined) return '';
    const counts = this.#counts;
    const lines = [
      '# HELP sync_host_store_chunk_bytes Bytes the chunks count (within sync_host_store_bytes).',
      '# TYPE sync_host_store_chunk_bytes gauge',
      `sync_host_store_chunk_bytes ${store.bytes()}`,
      '# HELP sync_host_store_chunks_stored_total Chunks stored (new ones; already held ones in held).',
      '# TYPE sync_host_store_chunks_stored_total counter',
      `sync_host_store_chunks_stored_total{kind="new"} ${counts.stored}`,
      `sync_host_store_chunks_stored_total{kind="held"} ${counts.already}`,
      '# HELP sync_host_store_chunks_refused_total Chunk puts refused.',
      '# TYPE sync_host_store_chunks_refused_total counter',
      `sync_host_store_chunks_refused_total{reason="full"} ${counts.full}`,
      `sync_host_store_chunks_refused_total{reason="failed"} ${counts.failed}`,
      '# HELP sync_host_store_chunks_received_total chunk-put frames received (held, refused or not).',
      '# TYPE sync_host_store_chunks_received_total counter',
      `sync_host_store_chunks_received_total ${counts.received}`,
      '# HELP sync_host_store_chunk_received_bytes_total Bytes of the chunks received in chunk-put.',
      '# TYPE sync_host_store_chunk_received_bytes_total counter',
      `sync_host_store_chunk_received_bytes_total ${counts.receivedBytes}`,
      '# HELP sync_host_store_chunks_sent_total Chunks sent to devices (chunk-get).',
      '# TYPE sync_host_store_chunks_sent_total counter',
      `sync_host_store_chunks_sent_total ${counts.sent}`,
      '# HELP sync_host_store_chunk_sent_bytes_total Bytes of the chunks sent to devices.',
      '# TYPE sync_host_store_chunk_sent_bytes_total counter',
      `sync_host_store_chunk_sent_bytes_total ${counts.sentBytes}`,
      '# HELP sync_host_store_chunk_binary_frames_total Chunks received and sent in binary frames (within the totals above).',
      '# TYPE sync_host_store_chunk_binary_frames_total counter',
      `sync_host_store_chunk_binary_frames_total{direction="received"} ${counts.binaryReceived}`,
      `sync_host_store_chunk_binary_frames_total{direction="sent"} ${counts.binarySent}`,
      '# HELP sync_host_store_chunks_missing_total chunk-get of a chunk the host does not hold.',
      '# TYPE sync_host_store_chunks_missing_total counter',
      `sync_host_store_chunks_missing_total ${counts.missing}`,
      '# HELP sync_host_store_chunks_dropped_total Chunks dropped as damaged (chunk-bad).',
      '# TYPE sync_host_store_chunks_dropped_total counter',
      `sync_host_store_chunks_dropped_total ${counts.dropped}`,
      '# HELP sync_host_store_reports_refused_total Folder reports refused (a bound, their size).',
      '# TYPE sync_host_store_reports_refused_total counter',
      `sync_host_store_reports_refused_total ${counts.reportsRefused}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}

/** Creates the handler of the chunk frames over `store`; see `ChunkFrames`. */
export function createChunkFrames(options: ChunkFramesOptions): ChunkFrames {
  return new RelayChunkFrames(options);
}
