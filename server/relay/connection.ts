import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import type { DeviceId, RouteTarget } from '../../protocol/relay-frames.ts';
import type { Access } from './join-check.ts';
import type { TokenBucket } from './rate-limit.ts';
import { SendQueue, type Writer } from './send-queue.ts';

/**
 * What a connection and the room directory use of the room it joined (`Room` in room.ts, which
 * implements it): declared here so that this record does not import the room.
 */
export interface JoinedRoom {
  readonly id: string;
  /** Nobody of the room is connected here: the room can be forgotten. */
  readonly idle: boolean;
  routeBytes(conn: Connection, to: RouteTarget, data: Buffer, toEnd: number): void;
  route(conn: Connection, to: RouteTarget, payload: Record<string, unknown>, data: Buffer): void;
  /**
   * Sends a frame of the relay's own to every device present in the room, connected here or (in
   * a cluster) to another node; nothing is kept for an absent device.
   */
  tellPresent(frame: object): void;
  leave(conn: Connection): void;
  drop(conn: Connection): void;
  close(): void;
}

/**
 * One WebSocket and what the relay knows about it. Each field has one writer: the room fields
 * (`room`, `deviceKey`, `deviceId`, `deviceJson`, `routeHead`) only through `enterRoom`,
 * `leaveRoom` and `routeHeadOf` below (the room calls them), the socket's (`alive`, `joinTimer`,
 * `held`, `access`) the socket handler alone.
 */
export interface Connection {
  readonly id: number;
  readonly socket: WebSocket;
  /** The TCP stream under `socket` (its queue corks it while a batch of frames is written). */
  readonly stream: Duplex;
  readonly bucket: TokenBucket;
  /** Answered the last ping (or sent something) since the previous heartbeat. */
  alive: boolean;
  /** Armed and cleared by the socket handler alone: the time left to join. */
  joinTimer: NodeJS.Timeout | undefined;
  /** The joined room; undefined before join and after leave. */
  readonly room: JoinedRoom | undefined;
  /** The key of `deviceId` (its decimal string) once joined: what rooms and the broker know it by. */
  readonly deviceKey: string;
  /** The device id as the client wrote it in its join, echoed in frames about it. */
  readonly deviceId: DeviceId;
  /** `deviceId` as JSON text, spliced into routed frames without serializing again. */
  readonly deviceJson: string;
  /** `{"from":<deviceJson>,"to":` as bytes, made on the first routed frame after a join. */
  readonly routeHead: Buffer | undefined;
  /**
   * Its frames on their way to the socket, within the relay's bounds on unsent bytes (`done`
   * once replaced, revoked or closing: further frames are ignored).
   */
  readonly queue: SendQueue<Connection>;
  /**
   * Frames that arrived while the join was being checked with the auth side (the socket is
   * paused meanwhile); handled in order once the check answers. Undefined outside such a check.
   */
  held: Array<{ data: import('ws').RawData; isBinary: boolean }> | undefined;
  /**
   * What the device may do in its room (owner, editor, viewer; a member's membership), set by
   * the socket handler when it admits a join.
   */
  access: Access;
}

/**
 * The WebSocket class of the relay's server: it carries its Connection, so that one set of
 * listener functions (with the socket as `this`) serves every socket instead of four closures
 * per connection.
 */
export class RelaySocket extends WebSocket {
  conn: Connection | undefined = undefined;
}

/** A connection just accepted: not joined, alive, with its own token bucket and send queue. */
export function createConnection(
  id: number,
  socket: WebSocket,
  stream: Duplex,
  bucket: TokenBucket,
  writer: Writer<Connection>,
): Connection {
  const conn: Omit<Connection, 'queue'> & { queue: SendQueue<Connection> | undefined } = {
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
    queue: undefined,
    held: undefined,
    access: { role: 'owner' },
  };
  conn.queue = new SendQueue(conn as Connection, socket, stream, writer);
  return conn as Connection;
}

type RoomKey = 'room' | 'deviceKey' | 'deviceId' | 'deviceJson' | 'routeHead';
/** The connection as its room fields' writers below see it. */
type RoomFields = Omit<Connection, RoomKey> & { -readonly [K in RoomKey]: Connection[K] };

/** The connection is `device` (by key `key`) in `room` from now on (a join the room took). */
export function enterRoom(conn: Connection, room: JoinedRoom, key: string, device: DeviceId): void {
  const fields = conn as RoomFields;
  fields.deviceKey = key;
  fields.deviceId = device;
  fields.deviceJson = JSON.stringify(device);
  fields.routeHead = undefined;
  fields.room = room;
}

/** The connection is in no room any more (left, replaced, refused, shut down). */
export function leaveRoom(conn: Connection): void {
  (conn as RoomFields).room = undefined;
}

/**
 * `{"from":<device>,"to":` as bytes, made once per join: the head of its routed frames. A
 * viewer's frames say so, `{"from":<device>,"role":"viewer","to":`, on every relay node the
 * frame reaches: the devices ignore document updates in them.
 */
export function routeHeadOf(conn: Connection): Buffer {
  const fields = conn as RoomFields;
  const role = conn.access.role === 'viewer' ? '"role":"viewer",' : '';
  fields.routeHead ??= Buffer.from(`{"from":${conn.deviceJson},${role}"to":`);
  return fields.routeHead;
}
