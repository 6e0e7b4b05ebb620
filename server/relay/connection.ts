import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { DeviceId } from '../../protocol/relay-frames.ts';
import type { TokenBucket } from './rate-limit.ts';
import type { Room } from './room.ts';

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
  room: Room | undefined;
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
  };
}

const textFrame = { binary: false } as const;

let corked: Duplex[] = [];
/** Frames written to corked streams since the last flush. */
let corkedFrames = 0;
/**
 * Above this many frames held in one event-loop turn everything is flushed at once: with
 * thousands of busy connections a single turn can read megabytes, and holding every reply
 * until its end costs more (memory, GC) than the system calls it saves.
 */
const maxCorkedFrames = 8192;

function uncorkAll(): void {
  const streams = corked;
  corked = [];
  corkedFrames = 0;
  for (const stream of streams) stream.uncork();
}

/**
 * Holds a receiver's writes until the end of this event-loop turn, so that every frame routed
 * to it while the relay handles one batch of input leaves in one `writev` instead of one system
 * call per frame (the dominant cost of a small message otherwise).
 */
function cork(stream: Duplex): void {
  if (stream.writableCorked > 0) return;
  stream.cork();
  if (corked.push(stream) === 1) setImmediate(uncorkAll);
}

/** Sends an already serialized text frame; the same Buffer is shared by every receiver. */
export function sendData(conn: Connection, data: Buffer): void {
  if (conn.socket.readyState !== conn.socket.OPEN) return;
  cork(conn.stream);
  conn.socket.send(data, textFrame);
  if (++corkedFrames >= maxCorkedFrames) flushCorked();
}

/** Writes out what is held now; the streams stay corked until the end of the turn. */
function flushCorked(): void {
  corkedFrames = 0;
  for (const stream of corked) {
    stream.uncork();
    stream.cork();
  }
}

/** Sends a control frame (`joined`, `presence`, `error`...). Not on the routed-message path. */
export function sendControl(conn: Connection, frame: object): void {
  if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(JSON.stringify(frame));
}
