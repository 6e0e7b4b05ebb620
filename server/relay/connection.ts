import type { WebSocket } from 'ws';
import type { CloseEvent } from './close-codes.ts';
import type { DeviceId } from './messages.ts';
import type { TokenBucket } from './rate-limit.ts';
import type { Room } from './room.ts';

/** One WebSocket and what the relay knows about it. */
export interface Connection {
  readonly id: number;
  readonly socket: WebSocket;
  readonly bucket: TokenBucket;
  /** Answered the last ping (or sent something) since the previous heartbeat. */
  alive: boolean;
  joinTimer: NodeJS.Timeout | undefined;
  /** The joined room; undefined before join and after leave. */
  room: Room | undefined;
  /** The device key (decimal string) once joined. */
  device: string;
  /** The device id as the client wrote it in its join, echoed in frames about it. */
  deviceId: DeviceId;
  /** `deviceId` as JSON text, spliced into routed frames without serializing again. */
  deviceJson: string;
  /** Replaced, revoked or closing: further frames are ignored. */
  done: boolean;
}

export function createConnection(id: number, socket: WebSocket, bucket: TokenBucket): Connection {
  return {
    id,
    socket,
    bucket,
    alive: true,
    joinTimer: undefined,
    room: undefined,
    device: '',
    deviceId: '',
    deviceJson: '""',
    done: false,
  };
}

const textFrame = { binary: false } as const;

/** Sends an already serialized text frame; the same Buffer is shared by every receiver. */
export function sendData(conn: Connection, data: Buffer): void {
  if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(data, textFrame);
}

/** Sends a control frame (`joined`, `presence`, `error`...). Not on the routed-message path. */
export function sendControl(conn: Connection, frame: object): void {
  if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(JSON.stringify(frame));
}

/** Stops handling the connection's frames and closes it with a named close code. */
export function closeWith(conn: Connection, event: CloseEvent): void {
  conn.done = true;
  if (conn.joinTimer !== undefined) clearTimeout(conn.joinTimer);
  conn.joinTimer = undefined;
  const state = conn.socket.readyState;
  if (state === conn.socket.OPEN || state === conn.socket.CONNECTING) {
    conn.socket.close(event.code, event.reason);
  }
}
