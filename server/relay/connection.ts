import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { DeviceId, RouteTarget } from '../../protocol/relay-frames.ts';
import type { TokenBucket } from './rate-limit.ts';

/**
 * What a connection and the room directory use of the room it joined (`Room` in room.ts, which
 * implements it): declared here so that this record imports neither the room nor the writer.
 */
export interface JoinedRoom {
  readonly id: string;
  /** Nobody of the room is connected here: the room can be forgotten. */
  readonly idle: boolean;
  routeBytes(conn: Connection, to: RouteTarget, data: Buffer, toEnd: number): void;
  route(conn: Connection, to: RouteTarget, payload: Record<string, unknown>, data: Buffer): void;
  leave(conn: Connection): void;
  drop(conn: Connection): void;
  close(): void;
}

/** The relay's bounds on unsent frames, shared by its connections (kept by `outbound.ts`). */
export interface Outbound {
  /** `relay.maxQueuedBytes`: unsent bytes one receiver may have. */
  readonly maxQueuedBytes: number;
  /** `relay.maxMemoryBytes`: unsent bytes of every receiver together. */
  readonly maxMemoryBytes: number;
  /** Bytes in the queues of the connections that are behind. */
  queuedBytes: number;
  /** Bytes in the write buffers of the sockets of connections that are behind, as last seen. */
  socketBytes: number;
  /** Connections whose socket did not take everything (their queue is `pending`). */
  readonly behind: Set<Connection>;
  /** Closes a receiver past a bound (1013) and keeps its queued frames for it. */
  readonly cut: (conn: Connection) => void;
}

/** One WebSocket and what the relay knows about it. */
export interface Connection {
  readonly id: number;
  readonly socket: WebSocket;
  /** The TCP stream under `socket`, corked while a batch of frames is written to it. */
  readonly stream: Duplex;
  readonly bucket: TokenBucket;
  /** Answered the last ping (or sent something) since the previous heartbeat. */
  alive: boolean;
  /** Armed and cleared by the socket handler alone: the time left to join. */
  joinTimer: NodeJS.Timeout | undefined;
  /** The joined room; undefined before join and after leave. */
  room: JoinedRoom | undefined;
  /** The key of `deviceId` (its decimal string) once joined: what rooms and the broker know it by. */
  deviceKey: string;
  /** The device id as the client wrote it in its join, echoed in frames about it. */
  deviceId: DeviceId;
  /** `deviceId` as JSON text, spliced into routed frames without serializing again. */
  deviceJson: string;
  /** `{"from":<deviceJson>,"to":` as bytes, made on the first routed frame after a join. */
  routeHead: Buffer | undefined;
  /** Replaced, revoked or closing: further frames are ignored. */
  done: boolean;
  /** The relay's bounds on unsent frames, shared by its connections. */
  readonly outbound: Outbound;
  /**
   * Frames waiting for the socket to drain (from `pendingHead` on), while the socket does not
   * take what it is given; undefined while it keeps up (see `outbound.ts`).
   */
  pending: Buffer[] | undefined;
  pendingHead: number;
  /** Bytes in `pending` from `pendingHead` on. */
  pendingBytes: number;
  /** The socket's write-buffer bytes as last counted in `outbound.socketBytes`. */
  socketBytes: number;
  /** Unsent bytes allowed beyond `relay.maxQueuedBytes` while a join's replay is written out. */
  allowanceBytes: number;
  /**
   * Frames that arrived while the join was being checked with the auth side (the socket is
   * paused meanwhile); handled in order once the check answers. Undefined outside such a check.
   */
  held: Array<{ data: import('ws').RawData; isBinary: boolean }> | undefined;
}

/**
 * The WebSocket class of the relay's server: it carries its Connection, so that one set of
 * listener functions (with the socket as `this`) serves every socket instead of four closures
 * per connection.
 */
export class RelaySocket extends WebSocket {
  conn: Connection | undefined = undefined;
}

/** A connection just accepted: not joined, alive, with its own token bucket. */
export function createConnection(
  id: number,
  socket: WebSocket,
  stream: Duplex,
  bucket: TokenBucket,
  outbound: Outbound,
): Connection {
  return {
    id,
    socket,
    stream,
    bucket,
    alive: true,
    joinTimer: undefined,
    room: undefined,
    deviceKey: '',
    deviceId: '',
    deviceJson: '""',
    routeHead: undefined,
    done: false,
    outbound,
    pending: undefined,
    pendingHead: 0,
    pendingBytes: 0,
    socketBytes: 0,
    allowanceBytes: 0,
    held: undefined,
  };
}
