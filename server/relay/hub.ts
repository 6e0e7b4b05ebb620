import type { Logger } from '../log.ts';
import type { AbsentDevice, MessageBuffer } from './buffer.ts';
import { Replaced, Revoked, TryAgainLater } from './close-codes.ts';
import { type Connection, closeWith, sendControl, sendData } from './connection.ts';
import { type DeviceId, deviceKey, type JoinFrame } from './messages.ts';
import { countError, type RelayMetrics } from './metrics.ts';
import { payloadSource } from './payload-span.ts';
import { Room } from './room.ts';
import { spliceRoutedFrame } from './routed-bytes.ts';
import type { Shards } from './shards.ts';

/** Error codes of contract 6 rule 5, plus `room_full` for `room.maxDevices`. */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_message'
  | 'not_joined'
  | 'already_joined'
  | 'unknown_target'
  | 'rate_limited'
  | 'room_full'
  | 'auth_failed';

export interface HubOptions {
  shards: Shards<Room>;
  buffer: MessageBuffer;
  metrics: RelayMetrics;
  logger: Logger;
  now: () => number;
  roomMaxDevices: number;
  bufferWindowMs: number;
  /** A receiver with more unsent bytes than this is closed (1013) and buffered for instead. */
  maxBufferedBytes: number;
}

/** Rooms, presence, host handover, routing and the hand-off to the durable buffer. */
export interface Hub {
  join(conn: Connection, frame: JoinFrame): void;
  /** `{"type":"leave"}`: leaves cleanly, nothing is buffered for the device. */
  leave(conn: Connection): void;
  /** The socket closed: a joined device without leave becomes absent and is buffered for. */
  drop(conn: Connection): void;
  /**
   * Routes a parsed `{to, payload}` in any spelling; `text` is the frame as received, and the
   * payload's source text is cut out of it (`payloadSource`), so it is forwarded unchanged.
   */
  route(conn: Connection, to: DeviceId, payload: Record<string, unknown>, text: string): void;
  /**
   * Routes a frame recognised on its bytes (`recogniseRouted`): `data` is the frame as received
   * and `toEnd` where its `to` value ends; the outgoing frame is spliced from them.
   */
  routeBytes(conn: Connection, to: DeviceId, data: Buffer, toEnd: number): void;
  /** Closes every connection of the device with 4003 and forgets everything kept for it. */
  revoke(device: string): void;
  /** Expires absent devices whose window passed and forgets idle rooms. */
  sweep(): void;
  /** Every joined connection becomes absent (shutdown); no presence frames are sent. */
  dropAll(): void;
}

/** Where a routed frame goes (see `targetOf`). */
type Target = Connection | AbsentDevice | 'broadcast';

const errorFrames = new Map<string, Buffer>();

/** A pre-serialized `{type:'error'}` frame for the fixed messages (no allocation per error). */
function errorFrame(code: ErrorCode, message: string): Buffer {
  const key = `${code}\u0000${message}`;
  let frame = errorFrames.get(key);
  if (frame === undefined) {
    frame = Buffer.from(JSON.stringify({ type: 'error', code, message }));
    if (errorFrames.size < 256) errorFrames.set(key, frame);
  }
  return frame;
}

export function sendError(
  conn: Connection,
  metrics: RelayMetrics,
  code: ErrorCode,
  message: string,
): void {
  countError(metrics, code);
  sendData(conn, errorFrame(code, message));
}

export function createHub(options: HubOptions): Hub {
  const { shards, buffer, metrics, logger, now } = options;

  function forgetIfIdle(room: Room): void {
    if (room.idle) shards.delete(room.id);
  }

  function deliver(receiver: Connection, data: Buffer): void {
    sendData(receiver, data);
    if (receiver.socket.bufferedAmount > options.maxBufferedBytes && !receiver.done) {
      // It stopped reading: close it; as a drop without leave it is buffered for on disk.
      metrics.slowReceivers++;
      closeWith(receiver, TryAgainLater);
      receiver.socket.terminate();
    }
  }

  /** A drop without leave: the device becomes absent and is buffered for. */
  function dropConn(conn: Connection): void {
    const room = conn.room;
    if (room === undefined) return;
    const newHost = room.remove(conn);
    const entry: AbsentDevice = {
      room: room.id,
      device: conn.device,
      droppedAt: now(),
      messages: 0,
      bytes: 0,
      gap: false,
    };
    room.absent.set(conn.device, entry);
    buffer.markAbsent(entry);
    announceDeparture(room, conn, newHost, 'disconnect');
    logger.debug({ room: room.id, device: conn.device }, 'dropped without leave');
  }

  /**
   * A member whose socket is closing (its close frame arrived, the TCP connection is not closed
   * yet) cannot receive: it counts as dropped now, so what is sent meanwhile is buffered.
   */
  function isClosing(conn: Connection): boolean {
    return conn.socket.readyState !== conn.socket.OPEN;
  }

  function toEveryone(room: Room, frame: object, except?: Connection): void {
    if (room.members.size === 0) return;
    const data = Buffer.from(JSON.stringify(frame));
    for (const member of room.members.values()) {
      if (member !== except) sendData(member, data);
    }
  }

  /** Presence `left` to the others, and the host handover when the host went. */
  function announceDeparture(
    room: Room,
    conn: Connection,
    newHost: Connection | undefined,
    reason: string,
  ) {
    toEveryone(room, {
      type: 'presence',
      room: room.id,
      device: conn.deviceId,
      state: 'left',
      reason,
    });
    if (newHost !== undefined) {
      toEveryone(room, { type: 'host', room: room.id, device: newHost.deviceId });
    }
  }

  function expire(room: Room, entry: AbsentDevice, at: number): void {
    room.absent.delete(entry.device);
    buffer.expire(entry, at);
  }

  /** The sender's room; undefined, with a `not_joined` error frame, before a join. */
  function joinedRoom(conn: Connection): Room | undefined {
    if (conn.room === undefined) sendError(conn, metrics, 'not_joined', 'join a room first');
    return conn.room;
  }

  /**
   * Where a routed frame goes: a present device, an absent one (buffered for), or everyone
   * else (`broadcast`). Undefined when refused; the sender got the error frame.
   */
  function targetOf(conn: Connection, room: Room, to: DeviceId): Target | undefined {
    if (to === 'broadcast') return 'broadcast';
    if (to === 'host') {
      if (room.host !== undefined && room.host !== conn && isClosing(room.host))
        dropConn(room.host);
      const host = room.host;
      if (host === conn) {
        sendError(conn, metrics, 'unknown_target', 'you are the host of this room');
        return undefined;
      }
      // no host at all: nobody is present but the sender's closing peers; nothing to deliver
      return host ?? 'broadcast';
    }
    const key = deviceKey(to);
    const direct = room.members.get(key);
    if (direct !== undefined && direct !== conn) {
      if (!isClosing(direct)) return direct;
      dropConn(direct);
    } else if (direct === conn) {
      sendError(conn, metrics, 'unknown_target', 'no such device in this room');
      return undefined;
    }
    const absent = room.absent.get(key);
    if (absent !== undefined) {
      const at = now();
      if (at < absent.droppedAt + options.bufferWindowMs) return absent;
      expire(room, absent, at);
    }
    sendError(conn, metrics, 'unknown_target', 'no such device in this room');
    return undefined;
  }

  /**
   * Delivers one routed frame, serialized once (`data`, shared by every receiver; `frame` is
   * its text when the caller has it, else it is decoded for the buffer only).
   */
  function forward(
    conn: Connection,
    room: Room,
    target: Target,
    data: Buffer,
    frame?: string,
  ): void {
    metrics.messagesRouted++;
    if (target !== 'broadcast') {
      if ('socket' in target) {
        deliver(target, data);
        metrics.messagesDelivered++;
      } else {
        buffer.append(target, frame ?? data.toString('utf8'), data.length);
        metrics.messagesBuffered++;
      }
      return;
    }
    let closing: Connection[] | undefined;
    for (const member of room.members.values()) {
      if (member === conn) continue;
      if (isClosing(member)) {
        closing ??= [];
        closing.push(member);
        continue;
      }
      deliver(member, data);
      metrics.messagesDelivered++;
    }
    if (closing !== undefined) for (const member of closing) dropConn(member);
    if (room.absent.size === 0) return;
    const text = frame ?? data.toString('utf8');
    const at = now();
    for (const entry of room.absent.values()) {
      if (at < entry.droppedAt + options.bufferWindowMs) {
        buffer.append(entry, text, data.length);
        metrics.messagesBuffered++;
      } else {
        expire(room, entry, at);
      }
    }
  }

  return {
    join(conn, frame) {
      const key = deviceKey(frame.device);
      const room = shards.getOrCreate(frame.room, (slot) => new Room(frame.room, slot));
      const older = room.members.get(key);
      if (older === undefined && room.members.size >= options.roomMaxDevices) {
        forgetIfIdle(room);
        sendError(
          conn,
          metrics,
          'room_full',
          `the room already has ${options.roomMaxDevices} devices (room.maxDevices)`,
        );
        return;
      }
      if (conn.joinTimer !== undefined) clearTimeout(conn.joinTimer);
      conn.joinTimer = undefined;
      conn.device = key;
      conn.deviceId = frame.device;
      conn.deviceJson = JSON.stringify(frame.device);
      conn.routeHead = undefined;
      if (older !== undefined) {
        room.replace(older, conn);
        metrics.replaced++;
        closeWith(older, Replaced);
      } else {
        room.add(conn);
      }
      room.absent.delete(key);
      metrics.joins++;

      const joined = {
        type: 'joined',
        room: room.id,
        device: conn.deviceId,
        role: room.host === conn ? 'host' : 'member',
        host: room.host?.deviceId ?? conn.deviceId,
        devices: room.deviceIds(),
        buffered: 0,
        gap: false,
      };
      let answered = false;
      try {
        buffer.takeOver(room.id, key, now(), (frames, gap) => {
          joined.buffered = frames.length;
          joined.gap = gap;
          sendControl(conn, joined);
          answered = true;
          for (const frame of frames) sendData(conn, Buffer.from(frame));
        });
        metrics.bufferDelivered += joined.buffered;
      } catch (err: unknown) {
        // The join still succeeds; the client learns from gap that it must resync.
        logger.error({ err, room: room.id, device: key }, 'buffer read failed on join');
        if (!answered) sendControl(conn, { ...joined, buffered: 0, gap: true });
      }
      if (older === undefined) {
        toEveryone(
          room,
          { type: 'presence', room: room.id, device: conn.deviceId, state: 'joined' },
          conn,
        );
      }
      logger.debug(
        { room: room.id, device: key, role: joined.role, buffered: joined.buffered },
        'joined',
      );
    },

    leave(conn) {
      const room = conn.room;
      if (room === undefined) return;
      const newHost = room.remove(conn);
      buffer.forget(room.id, conn.device);
      announceDeparture(room, conn, newHost, 'leave');
      forgetIfIdle(room);
      logger.debug({ room: room.id, device: conn.device }, 'left');
    },

    drop: dropConn,

    route(conn, to, parsedPayload, text) {
      const room = joinedRoom(conn);
      if (room === undefined) return;
      const target = targetOf(conn, room, to);
      if (target === undefined) return;
      const toJson = typeof to === 'number' ? String(to) : JSON.stringify(to);
      const payload = payloadSource(text) ?? JSON.stringify(parsedPayload);
      // One serialization per message, shared by every receiver and the buffer.
      const frame = `{"from":${conn.deviceJson},"to":${toJson},"room":${room.idJson},"payload":${payload}}`;
      forward(conn, room, target, Buffer.from(frame), frame);
    },

    routeBytes(conn, to, data, toEnd) {
      const room = joinedRoom(conn);
      if (room === undefined) return;
      const target = targetOf(conn, room, to);
      if (target === undefined) return;
      conn.routeHead ??= Buffer.from(`{"from":${conn.deviceJson},"to":`);
      forward(conn, room, target, spliceRoutedFrame(data, toEnd, conn.routeHead, room.roomMember));
    },

    revoke(device) {
      // A rare admin action: a scan of the rooms instead of a per-device index kept for it
      // on every join (memory per connection is what a relay of idle devices is made of).
      for (const room of [...shards.rooms()]) {
        const conn = room.members.get(device);
        if (conn !== undefined) {
          const newHost = room.remove(conn);
          announceDeparture(room, conn, newHost, 'revoked');
          metrics.revoked++;
          closeWith(conn, Revoked);
        }
        room.absent.delete(device);
        forgetIfIdle(room);
      }
    },

    sweep() {
      const at = now();
      for (const room of [...shards.rooms()]) {
        for (const entry of [...room.absent.values()]) {
          if (at >= entry.droppedAt + options.bufferWindowMs) expire(room, entry, at);
        }
        forgetIfIdle(room);
      }
    },

    dropAll() {
      const at = now();
      for (const room of shards.rooms()) {
        for (const conn of room.members.values()) {
          const entry: AbsentDevice = {
            room: room.id,
            device: conn.device,
            droppedAt: at,
            messages: 0,
            bytes: 0,
            gap: false,
          };
          room.absent.set(conn.device, entry);
          buffer.markAbsent(entry);
          conn.room = undefined;
        }
        room.members.clear();
        room.host = undefined;
      }
    },
  };
}
