import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import type { Logger } from '../log.ts';
import { type JoinCheck, joinRefusals, refuseJoin } from './authorize.ts';
import { AuthFailed, JoinTimeout, UnsupportedData } from './close-codes.ts';
import {
  type Connection,
  closeWith,
  createConnection,
  type RelaySocket,
  sendData,
} from './connection.ts';
import { type Hub, sendError } from './hub.ts';
import { parseFrame } from './messages.ts';
import type { RelayMetrics } from './metrics.ts';
import { createTokenBucket } from './rate-limit.ts';
import { recogniseRouted } from './routed-bytes.ts';

export interface SocketHandlerOptions {
  hub: Hub;
  metrics: RelayMetrics;
  logger: Logger;
  check: JoinCheck;
  ratePerSecond: number;
  rateBurst: number;
  joinTimeoutMs: number;
  /** Above this many unsent bytes a sender gets no `rate_limited` frames, only silence. */
  maxBufferedBytes: number;
}

/** Accepts upgraded sockets: join timeout, rate limit, frame parsing and dispatch, heartbeat. */
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
}

const pongFrame = Buffer.from('{"type":"pong"}');

function rawText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export function createSocketHandler(options: SocketHandlerOptions): SocketHandler {
  const { hub, metrics, logger, check } = options;
  const connections = new Set<Connection>();
  let nextId = 1;

  function armJoinTimer(conn: Connection): void {
    if (conn.joinTimer !== undefined) clearTimeout(conn.joinTimer);
    conn.joinTimer = setTimeout(() => {
      conn.joinTimer = undefined;
      if (conn.room !== undefined || conn.done) return;
      metrics.joinTimeouts++;
      closeWith(conn, JoinTimeout);
    }, options.joinTimeoutMs);
  }

  function connectionOnMessage(conn: Connection, data: RawData, isBinary: boolean): void {
    if (conn.done) return;
    conn.alive = true;
    if (isBinary) {
      closeWith(conn, UnsupportedData);
      return;
    }
    if (!conn.bucket.take()) {
      metrics.rateLimited++;
      if (conn.socket.bufferedAmount < options.maxBufferedBytes) {
        sendError(conn, metrics, 'rate_limited', 'too many messages: this one was dropped');
      }
      return;
    }
    if (Buffer.isBuffer(data)) {
      const routed = recogniseRouted(data);
      if (routed !== undefined) {
        hub.routeBytes(conn, routed.to, data, routed.toEnd);
        return;
      }
    }
    const text = rawText(data);
    const frame = parseFrame(text);
    switch (frame.type) {
      case 'route':
        hub.route(conn, frame.to, frame.payload, text);
        return;
      case 'ping':
        sendData(conn, pongFrame);
        return;
      case 'join': {
        if (conn.room !== undefined) {
          sendError(conn, metrics, 'already_joined', `already joined room ${conn.room.id}`);
          return;
        }
        const refusal = refuseJoin(frame, check);
        if (refusal !== undefined) {
          metrics.authFailures++;
          logger.info({ room: frame.room, device: frame.device, refusal }, 'join refused');
          sendError(conn, metrics, 'auth_failed', joinRefusals[refusal]);
          closeWith(conn, AuthFailed);
          return;
        }
        hub.join(conn, frame);
        return;
      }
      case 'leave':
        if (conn.room === undefined) {
          sendError(conn, metrics, 'not_joined', 'not in a room');
          return;
        }
        hub.leave(conn);
        // an open socket outside any room must join again in time, as after connecting
        armJoinTimer(conn);
        return;
      case 'invalid_json':
        sendError(conn, metrics, 'invalid_json', 'the frame is not valid JSON');
        return;
      case 'invalid_message':
        sendError(conn, metrics, 'invalid_message', frame.message);
        return;
    }
  }

  // One function per event for every socket; `this` is the socket (a RelaySocket, created by
  // the relay's WebSocketServer), which carries its Connection.
  function onMessage(this: WebSocket, data: RawData, isBinary: boolean): void {
    const conn = (this as RelaySocket).conn;
    if (conn !== undefined) connectionOnMessage(conn, data, isBinary);
  }

  function onPong(this: WebSocket): void {
    const conn = (this as RelaySocket).conn;
    if (conn !== undefined) conn.alive = true;
  }

  function onError(this: WebSocket, err: Error): void {
    // Protocol violations (oversized frame: ws closes with 1009, bad UTF-8: 1007).
    const conn = (this as RelaySocket).conn;
    logger.debug({ connection: conn?.id, code: (err as { code?: string }).code }, err.message);
  }

  function onClose(this: WebSocket): void {
    const conn = (this as RelaySocket).conn;
    if (conn === undefined) return;
    if (conn.joinTimer !== undefined) clearTimeout(conn.joinTimer);
    conn.joinTimer = undefined;
    connections.delete(conn);
    hub.drop(conn);
  }

  return {
    connections,

    accept(socket, stream) {
      const conn = createConnection(
        nextId++,
        socket,
        stream,
        createTokenBucket(options.ratePerSecond, options.rateBurst),
      );
      socket.conn = conn;
      connections.add(conn);
      armJoinTimer(conn);
      socket.on('message', onMessage);
      socket.on('pong', onPong);
      socket.on('error', onError);
      socket.on('close', onClose);
    },

    heartbeat(slice = 0, slices = 1) {
      for (const conn of connections) {
        if (conn.id % slices !== slice) continue;
        if (!conn.alive) {
          metrics.heartbeatTimeouts++;
          conn.done = true;
          conn.socket.terminate();
          continue;
        }
        conn.alive = false;
        conn.socket.ping();
      }
    },
  };
}
