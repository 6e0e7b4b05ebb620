import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import {
  AuthFailed,
  JoinTimeout,
  NotStored,
  TryAgainLater,
  UnsupportedData,
} from '../../protocol/relay-codes.ts';
import type {
  ChunkBadFrame,
  ChunkGetFrame,
  ChunkHaveFrame,
  ChunkPutFrame,
  FolderReportFrame,
  JoinFrame,
} from '../../protocol/relay-frames.ts';
import type { Logger } from '../log.ts';
import type { ChunkFrames } from './chunk-frames.ts';
import { type Connection, createConnection, type RelaySocket } from './connection.ts';
import type { DocumentFrames } from './document-frames.ts';
import {
  type Admitted,
  checkJoin,
  type JoinCheck,
  type JoinRefusal,
  joinRefusals,
} from './join-check.ts';
import { type InvalidFrame, parseBinaryFrame, parseFrameBytes } from './messages.ts';
import type { RelayMetrics } from './metrics.ts';
import { closeWith, sendError, terminate } from './protocol-errors.ts';
import { createTokenBucket } from './rate-limit.ts';
import type { Rooms } from './rooms.ts';
import { recogniseRouted } from './routed-bytes.ts';
import { Writer } from './send-queue.ts';

export interface SocketHandlerOptions {
  rooms: Rooms;
  metrics: RelayMetrics;
  logger: Logger;
  check: JoinCheck;
  ratePerSecond: number;
  rateBurst: number;
  /** A connection outside any room is closed with 4008 after this long. */
  joinTimeoutMs: number;
  /** `relay.maxQueuedBytes`: unsent bytes one receiver may have before it is closed (1013). */
  maxQueuedBytes: number;
  /** `relay.maxMemoryBytes`: unsent bytes of all receivers together (see `send-queue.ts`). */
  maxMemoryBytes: number;
  /** A connection joined a room for the first time (`stream` is its TCP stream). */
  joined?: (stream: Duplex) => void;
  /** What a `pong` waits for: the frames handed beyond this process being stored (the broker's). */
  settled?: () => Promise<void> | undefined;
  /** What a `pong` of a joined device waits for: false when some of its frames were not stored. */
  stored?: (room: string, device: string) => Promise<boolean> | undefined;
  /** Answers `append` and `catchup` (the document store). */
  documents: DocumentFrames;
  /** Answers `chunk-put`, `chunk-have`, `chunk-get`, `chunk-bad`, and keeps `folder-report`. */
  chunks: ChunkFrames;
}

/**
 * Accepts upgraded sockets and owns each connection outside a room (the join timer, the join and
 * its validation), then hands frames to its room: rate limit, frame parsing and dispatch,
 * heartbeat.
 */
export interface SocketHandler {
  /** Takes over an upgraded socket; `stream` is the TCP stream under it. */
  accept(socket: RelaySocket, stream: Duplex): void;
  /** Every open connection, joined or not. */
  readonly connections: ReadonlySet<Connection>;
  /**
   * One slice of a heartbeat round (connections whose id modulo `slices` is `slice`; all of
   * them by default): closes those that did not answer the previous ping, pings the rest.
   */
  heartbeat(slice?: number, slices?: number): void;
  /** Bytes not yet sent to receivers that are behind. */
  unsentBytes(): number;
}

const pongFrame = Buffer.from('{"type":"pong"}');

/**
 * Answers a `ping` once what the device sent before it was handed to the receivers' sockets
 * and to the buffer: a `pong` confirms that, so it never leaves first (see `afterWrites`).
 */
function pong(conn: Connection): void {
  conn.queue.writer.afterWrites(() => conn.queue.send(pongFrame));
}

/** A text frame's bytes (`ws` hands over a Buffer unless told otherwise). */
function frameBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** Accepts the relay's sockets; see `SocketHandler`. */
class RelaySocketHandler implements SocketHandler {
  readonly connections = new Set<Connection>();
  readonly #options: SocketHandlerOptions;
  readonly #rooms: Rooms;
  readonly #metrics: RelayMetrics;
  readonly #logger: Logger;
  readonly #writer: Writer<Connection>;
  #nextId = 1;
  // One function per event for every socket; `this` is the socket (a RelaySocket, created by
  // the relay's WebSocketServer), which carries its Connection.
  readonly #onMessage: (this: WebSocket, data: RawData, isBinary: boolean) => void;
  readonly #onPong: (this: WebSocket) => void;
  readonly #onError: (this: WebSocket, err: Error) => void;
  readonly #onClose: (this: WebSocket) => void;

  constructor(options: SocketHandlerOptions) {
    this.#options = options;
    const { rooms, metrics, logger } = options;
    this.#rooms = rooms;
    this.#metrics = metrics;
    this.#logger = logger;
    // A receiver past the bounds on unsent frames: it becomes absent (what it had queued is
    // kept for it, like everything routed to it from now on) and is closed with 1013.
    this.#writer = new Writer<Connection>(
      options.maxQueuedBytes,
      options.maxMemoryBytes,
      (conn) => {
        metrics.slowReceivers++;
        logger.info(
          { connection: conn.id, room: conn.room?.id, device: conn.deviceKey || undefined },
          'receiver too slow: closed (1013), buffered for',
        );
        rooms.drop(conn);
        closeWith(conn, TryAgainLater);
      },
    );
    const handler = this;
    this.#onMessage = function onMessage(data, isBinary) {
      const conn = (this as RelaySocket).conn;
      if (conn !== undefined) handler.#connectionOnMessage(conn, data, isBinary);
    };
    this.#onPong = function onPong() {
      const conn = (this as RelaySocket).conn;
      if (conn !== undefined) conn.alive = true;
    };
    this.#onError = function onError(err) {
      // Protocol violations (oversized frame: ws closes with 1009, bad UTF-8: 1007).
      const conn = (this as RelaySocket).conn;
      logger.debug({ connection: conn?.id, code: (err as { code?: string }).code }, err.message);
    };
    this.#onClose = function onClose() {
      const conn = (this as RelaySocket).conn;
      if (conn === undefined) return;
      handler.#clearJoinTimer(conn);
      handler.connections.delete(conn);
      rooms.drop(conn);
      conn.queue.release();
    };
  }

  accept(socket: RelaySocket, stream: Duplex): void {
    const { ratePerSecond, rateBurst } = this.#options;
    const conn = createConnection(
      this.#nextId++,
      socket,
      stream,
      createTokenBucket(ratePerSecond, rateBurst),
      this.#writer,
    );
    socket.conn = conn;
    this.connections.add(conn);
    this.#armJoinTimer(conn);
    socket.on('message', this.#onMessage);
    socket.on('pong', this.#onPong);
    socket.on('error', this.#onError);
    socket.on('close', this.#onClose);
  }

  unsentBytes(): number {
    return this.#writer.unsentBytes;
  }

  heartbeat(slice = 0, slices = 1): void {
    for (const conn of this.connections) {
      if (conn.id % slices !== slice) continue;
      if (!conn.alive) {
        this.#metrics.heartbeatTimeouts++;
        terminate(conn);
        continue;
      }
      conn.alive = false;
      conn.socket.ping();
    }
  }

  #armJoinTimer(conn: Connection): void {
    this.#clearJoinTimer(conn);
    conn.joinTimer = setTimeout(() => {
      conn.joinTimer = undefined;
      if (conn.room !== undefined || conn.queue.done) return;
      this.#metrics.joinTimeouts++;
      closeWith(conn, JoinTimeout);
    }, this.#options.joinTimeoutMs);
  }

  #clearJoinTimer(conn: Connection): void {
    if (conn.joinTimer !== undefined) clearTimeout(conn.joinTimer);
    conn.joinTimer = undefined;
  }

  #refuse(conn: Connection, frame: JoinFrame, refusal: JoinRefusal): void {
    this.#metrics.authFailures++;
    this.#logger.info({ room: frame.room, device: frame.device, refusal }, 'join refused');
    sendError(conn, this.#metrics, 'auth_failed', joinRefusals[refusal]);
    closeWith(conn, AuthFailed);
  }

  #admit(conn: Connection, frame: JoinFrame, admitted: Admitted): void {
    conn.access = admitted.access;
    this.#rooms.join(conn, frame);
    if (conn.room === undefined) return;
    this.#clearJoinTimer(conn);
    this.#options.joined?.(conn.stream);
  }

  /**
   * The first frame that counts: a join, validated here before its room sees it. When the
   * device must be looked up at the auth side, the socket is paused and the frames that came
   * with the join are held until the answer, then handled in order.
   */
  #connectionOnJoin(conn: Connection, frame: JoinFrame): void {
    if (conn.room !== undefined) {
      sendError(conn, this.#metrics, 'already_joined', `already joined room ${conn.room.id}`);
      return;
    }
    const verdict = checkJoin(frame, this.#options.check);
    if (!(verdict instanceof Promise)) {
      if (typeof verdict !== 'string') this.#admit(conn, frame, verdict);
      else this.#refuse(conn, frame, verdict);
      return;
    }
    conn.held = [];
    conn.socket.pause();
    void verdict.then((refusal) => {
      const held = conn.held ?? [];
      conn.held = undefined;
      if (conn.queue.done || conn.socket.readyState !== conn.socket.OPEN) return;
      if (typeof refusal !== 'string') this.#admit(conn, frame, refusal);
      else this.#refuse(conn, frame, refusal);
      for (const { data, isBinary } of held) this.#connectionOnMessage(conn, data, isBinary);
      conn.socket.resume();
    });
  }

  /** The `pong` of a ping, once what the device sent before it is kept (see `pong`). */
  #answerPing(conn: Connection): void {
    const stored = conn.room && this.#options.stored?.(conn.room.id, conn.deviceKey);
    if (stored) {
      void stored.then((ok) => (ok ? pong(conn) : closeWith(conn, NotStored)));
      return;
    }
    const settled = this.#options.settled?.();
    if (settled === undefined) pong(conn);
    else void settled.then(() => pong(conn));
  }

  #chunkFrame(
    conn: Connection,
    frame: ChunkPutFrame | ChunkHaveFrame | ChunkGetFrame | ChunkBadFrame | FolderReportFrame,
  ): void {
    if (conn.room === undefined) {
      this.#notJoined(conn);
      return;
    }
    const chunks = this.#options.chunks;
    if (frame.type === 'chunk-put') chunks.put(conn, frame);
    else if (frame.type === 'chunk-have') chunks.have(conn, frame);
    else if (frame.type === 'chunk-get') chunks.get(conn, frame);
    else if (frame.type === 'chunk-bad') chunks.bad(conn, frame);
    else chunks.report(conn, frame);
  }

  #notJoined(conn: Connection): void {
    sendError(conn, this.#metrics, 'not_joined', 'join a room first');
  }

  #connectionOnMessage(conn: Connection, data: RawData, isBinary: boolean): void {
    if (conn.queue.done) return;
    if (conn.held !== undefined) {
      conn.held.push({ data, isBinary });
      return;
    }
    conn.alive = true;
    if (isBinary) {
      this.#binaryFrame(conn, frameBytes(data));
      return;
    }
    if (!this.#withinRate(conn)) return;
    const bytes = frameBytes(data);
    const routed = recogniseRouted(bytes);
    if (routed !== undefined) {
      if (conn.room === undefined) this.#notJoined(conn);
      else conn.room.routeBytes(conn, routed.to, bytes, routed.toEnd);
      return;
    }
    const frame = parseFrameBytes(bytes);
    switch (frame.type) {
      case 'route':
        if (conn.room === undefined) this.#notJoined(conn);
        else conn.room.route(conn, frame.to, frame.payload, bytes);
        return;
      case 'ping':
        this.#ping(conn);
        return;
      case 'join':
        this.#connectionOnJoin(conn, frame);
        return;
      case 'leave':
        if (conn.room === undefined) {
          sendError(conn, this.#metrics, 'not_joined', 'not in a room');
          return;
        }
        this.#rooms.leave(conn);
        // an open socket outside any room must join again in time, as after connecting
        this.#armJoinTimer(conn);
        return;
      case 'invalid_json':
        sendError(conn, this.#metrics, 'invalid_json', 'the frame is not valid JSON');
        return;
      case 'append':
        if (conn.room === undefined) this.#notJoined(conn);
        else this.#options.documents.append(conn, frame);
        return;
      case 'catchup':
        if (conn.room === undefined) this.#notJoined(conn);
        else this.#options.documents.catchUp(conn, frame);
        return;
      case 'chunk-put':
      case 'chunk-have':
      case 'chunk-get':
      case 'chunk-bad':
      case 'folder-report':
        this.#chunkFrame(conn, frame);
        return;
      case 'invalid_message':
        this.#invalid(conn, frame);
        return;
    }
  }

  /** Takes a token of the connection's rate; false (and `rate_limited`) when none is left. */
  #withinRate(conn: Connection): boolean {
    if (conn.bucket.take()) return true;
    this.#metrics.rateLimited++;
    // a sender that does not read its own socket gets no error frames, only silence
    if (!conn.queue.isBehind) {
      sendError(conn, this.#metrics, 'rate_limited', 'too many messages: this one was dropped');
    }
    return false;
  }

  /**
   * A binary frame: a `chunk-put` in the binary form goes to the chunk frames like its text form
   * (rate, `not_joined`, `invalid_message` alike); any other closes the connection with 1003.
   */
  #binaryFrame(conn: Connection, bytes: Buffer): void {
    const frame = parseBinaryFrame(bytes);
    if (frame === undefined) {
      closeWith(conn, UnsupportedData);
      return;
    }
    if (!this.#withinRate(conn)) return;
    if (frame.type === 'invalid_message') this.#invalid(conn, frame);
    else if (conn.room === undefined) this.#notJoined(conn);
    else this.#options.chunks.put(conn, frame, true);
  }

  /** A `ping`: answered after the answers to the appends and chunk frames sent before it. */
  #ping(conn: Connection): void {
    const documents = this.#options.documents.answered(conn);
    const chunks = this.#options.chunks.answered(conn);
    if (documents === undefined && chunks === undefined) this.#answerPing(conn);
    else void Promise.all([documents, chunks]).then(() => this.#answerPing(conn));
  }

  /** A malformed frame: its error names the ref (and doc or chunk id) of a store frame. */
  #invalid(conn: Connection, frame: InvalidFrame): void {
    if (frame.id !== undefined || (frame.ref !== undefined && frame.doc === undefined)) {
      this.#options.chunks.invalid(conn, frame.message, frame.ref, frame.id);
    } else if (frame.doc !== undefined || frame.ref !== undefined) {
      this.#options.documents.invalid(conn, frame.message, frame.doc, frame.ref);
    } else {
      sendError(conn, this.#metrics, 'invalid_message', frame.message);
    }
  }
}

/** Accepts the relay's sockets; see `SocketHandler`. */
export function createSocketHandler(options: SocketHandlerOptions): SocketHandler {
  return new RelaySocketHandler(options);
}
