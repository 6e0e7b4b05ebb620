import { JoinsUnavailable, Replaced, Revoked } from '../../protocol/relay-codes.ts';
import type { JoinedFrame } from '../../protocol/relay-frames.ts';
import {
  type DeviceId,
  deviceKey,
  type HostFrame,
  type JoinFrame,
  type PresenceFrame,
  type RouteTarget,
} from '../../protocol/relay-frames.ts';
import type { MemberRole } from '../../protocol/room-grant.ts';
import type { Logger } from '../log.ts';
import type { Admission, Broker, DepartureReason, RoomLine, RoomListener } from './broker.ts';
import {
  type Connection,
  enterRoom,
  type JoinedRoom,
  leaveRoom,
  routeHeadOf,
} from './connection.ts';
import type { RelayMetrics } from './metrics.ts';
import { closeWith, sendError } from './protocol-errors.ts';
import { MemberRecords } from './room-members.ts';
import { composeParsedFrame, spliceRoutedFrame } from './routed-bytes.ts';
import type { UnsentFrame } from './send-queue.ts';

/** What every room of a relay shares. */
export interface RoomContext {
  broker: Broker;
  metrics: RelayMetrics;
  logger: Logger;
  /** `room.maxDevices`: devices present at once. */
  maxDevices: number;
}

/** Where a routed frame goes: a connection here, a device key for the broker, or everyone else. */
type Target = Connection | string | typeof everyone;
const everyone = Symbol('everyone');

/** `{"from"…`: a routed frame (every frame the relay makes itself starts `{"type"`). */
function isRouted(frame: Buffer): boolean {
  return frame[2] === 0x66;
}

/**
 * The routed frames a connection had queued and never written (a receiver that stopped reading,
 * closed with 1013 or gone), in order: the broker keeps them for its device.
 */
function routedUnsent(conn: Connection): UnsentFrame[] {
  return conn.queue.takeUnsent().filter((unsent) => isRouted(unsent.frame));
}

/**
 * A member whose socket is closing (its close frame arrived, the TCP connection is not closed
 * yet) cannot receive: it counts as dropped now, so what is sent meanwhile is buffered.
 */
function isClosing(conn: Connection): boolean {
  return conn.socket.readyState !== conn.socket.OPEN;
}

/**
 * One room as this process holds it: its connections here (in join order), presence and host
 * frames to them, and routing: every routed frame is built once and delivered to the connections
 * here, the rest handed to the broker (devices elsewhere or absent, see `broker.ts`).
 */
export class Room implements RoomListener, JoinedRoom {
  readonly id: string;
  /** `id` as JSON text, spliced into routed and presence frames. */
  readonly idJson: string;
  /** djb2(id) slot. */
  readonly slot: number;
  /** Connections here by device key; Map order is join order. */
  readonly members = new Map<string, Connection>();
  /** The host's connection when the host is connected here. */
  host: Connection | undefined;
  readonly #line: RoomLine;
  readonly #context: RoomContext;
  #roomMember: Buffer | undefined;
  /** The room on every node (present devices, host), as its line's events told it. */
  readonly #records = new MemberRecords();
  /** Joins handed to the line and not answered yet, by ticket, with what they carry over. */
  readonly #joining = new Map<number, PendingJoin>();
  #tickets = 0;

  constructor(id: string, slot: number, context: RoomContext) {
    this.id = id;
    this.idJson = JSON.stringify(id);
    this.slot = slot;
    this.#context = context;
    this.#line = context.broker.open(id, this);
  }

  /** `,"room":<idJson>` as bytes, spliced into routed frames (made on the first one). */
  get roomMember(): Buffer {
    this.#roomMember ??= Buffer.from(`,"room":${this.idJson}`);
    return this.#roomMember;
  }

  /** Nobody of the room is connected here: the room can be forgotten. */
  get idle(): boolean {
    // a join the broker has not answered yet keeps the room (a cluster join takes seconds while
    // NATS elects leaders): forgotten meanwhile, its connection would join a room nobody holds
    return this.members.size === 0 && this.#joining.size === 0;
  }

  /**
   * A validated join. A device already present replaces its older connection (closed with 4009)
   * in its place and role; a new one is refused with `room_full` beyond `room.maxDevices`. The
   * device gets `joined` and what was kept for it; the others get presence `joined`. False when
   * refused.
   */
  join(conn: Connection, frame: JoinFrame): boolean {
    const { metrics, maxDevices } = this.#context;
    const key = deviceKey(frame.device);
    if (this.#records.idOf(key) === undefined && this.#records.size >= maxDevices) {
      sendError(
        conn,
        metrics,
        'room_full',
        `the room already has ${maxDevices} devices (room.maxDevices)`,
      );
      return false;
    }
    enterRoom(conn, this, key, frame.device);
    const older = this.members.get(key);
    // what the older connection had queued and never received goes to the newer one first
    let carried: UnsentFrame[] = [];
    if (older !== undefined) {
      leaveRoom(older);
      carried = routedUnsent(older);
      metrics.replaced++;
      closeWith(older, Replaced);
    }
    metrics.joins++;
    const ticket = ++this.#tickets;
    this.#joining.set(ticket, { conn, carried });
    // Until the line admits it (during this call in-process), the connection is in the room but
    // not among the members: messages for it go to the broker, which keeps their order.
    this.#line.join(frame.device, ticket, conn.access.role);
    return true;
  }

  /** `{"type":"leave"}`: leaves cleanly, nothing is kept for the device. */
  leave(conn: Connection): void {
    if (!this.#remove(conn)) return;
    // the connection stays open: what it had queued is still written to it
    this.#line.depart(conn.deviceKey, 'leave', []);
    this.#context.logger.debug({ room: this.id, device: conn.deviceKey }, 'left');
  }

  /** The socket closed (or is closing) without leave: the device becomes absent, kept for. */
  drop(conn: Connection, undelivered: readonly UnsentFrame[] = []): void {
    if (!this.#remove(conn)) return;
    this.#line.depart(conn.deviceKey, 'disconnect', [...routedUnsent(conn), ...undelivered]);
    this.#context.logger.debug({ room: this.id, device: conn.deviceKey }, 'dropped without leave');
  }

  /**
   * Closes the device's connection here with 4003; false when it has none here. A join of the
   * device still waiting for the line is revoked as soon as the line admits it.
   */
  revoke(device: string): boolean {
    this.#revokePending((conn) => conn.deviceKey === device);
    const conn = this.members.get(device);
    if (conn === undefined) return false;
    this.#remove(conn);
    // nothing is kept for a revoked device
    conn.queue.takeUnsent();
    this.#line.depart(device, 'revoked', []);
    this.#context.metrics.revoked++;
    closeWith(conn, Revoked);
    return true;
  }

  /**
   * Closes with 4003 the connections here (and the joins waiting for the line) of an ended
   * membership: `memberKey`'s grants up to membership `memberId`.
   */
  revokeMember(memberKey: string, memberId: number): void {
    const ended = (conn: Connection) =>
      conn.access.memberKey === memberKey && (conn.access.memberId ?? 0) <= memberId;
    this.#revokePending(ended);
    for (const conn of [...this.members.values()]) if (ended(conn)) this.revoke(conn.deviceKey);
  }

  /** Marks the joins waiting for the line that `revoked` matches: revoked once admitted. */
  #revokePending(revoked: (conn: Connection) => boolean): void {
    for (const pending of this.#joining.values()) if (revoked(pending.conn)) pending.revoked = true;
  }

  /** Shutdown: every connection here becomes absent at once; no presence frames are sent. */
  dropAll(): void {
    const members = [...this.members.values()];
    for (const conn of members) leaveRoom(conn);
    this.members.clear();
    this.host = undefined;
    const unsent = new Map(members.map((conn) => [conn.deviceKey, routedUnsent(conn)]));
    this.#line.dropAll(unsent);
  }

  /** The room is forgotten by this process. */
  close(): void {
    this.#line.release();
  }

  /**
   * Routes a frame recognised on its bytes (`recogniseRouted`): `data` is the frame as received
   * and `toEnd` where its `to` value ends; the outgoing frame is spliced from them.
   */
  routeBytes(conn: Connection, to: RouteTarget, data: Buffer, toEnd: number): void {
    const target = this.#target(conn, to);
    if (target === undefined) return;
    this.#forward(conn, target, spliceRoutedFrame(data, toEnd, routeHeadOf(conn), this.roomMember));
  }

  /**
   * Routes a parsed `{to, payload}` in any other spelling: `data` is the frame as received; the
   * payload's source is cut out of it (`payloadSpan`), so it is forwarded unchanged.
   */
  route(conn: Connection, to: RouteTarget, payload: Record<string, unknown>, data: Buffer): void {
    const target = this.#target(conn, to);
    if (target === undefined) return;
    const head = routeHeadOf(conn);
    this.#forward(conn, target, composeParsedFrame(head, to, payload, data, this.roomMember));
  }

  tellPresent(frame: object): void {
    this.#line.notice(this.#toEveryone(frame));
  }

  // ---- what the broker reports (RoomListener) ----

  admitted(ticket: number, admission: Admission): void {
    const pending = this.#joining.get(ticket);
    if (pending === undefined) return;
    this.#joining.delete(ticket);
    this.#records.admitted(admission);
    this.#findHost();
    if (pending.conn.room !== this) return;
    this.#admit(pending, admission);
    // revoked while the line decided: admitted on every node, then closed as any revoked one
    if (pending.revoked === true) this.revoke(pending.conn.deviceKey);
  }

  refused(ticket: number): void {
    const pending = this.#joining.get(ticket);
    if (pending === undefined) return;
    this.#joining.delete(ticket);
    if (pending.conn.room === this) this.#refuse(pending);
  }

  joined(device: DeviceId, role?: MemberRole): void {
    this.#records.joined(device, role);
    this.#findHost();
    const conn = this.members.get(deviceKey(device));
    const frame: PresenceFrame = {
      type: 'presence',
      room: this.id,
      device,
      state: 'joined',
      ...(role !== undefined && { role }),
    };
    this.#toEveryone(frame, conn);
  }

  left(device: DeviceId, reason: DepartureReason): void {
    this.#records.left(device);
    this.#findHost();
    const frame: PresenceFrame = { type: 'presence', room: this.id, device, state: 'left', reason };
    this.#toEveryone(frame);
  }

  hostChanged(device: DeviceId, announced: boolean): void {
    this.#records.host(device);
    this.#findHost();
    if (!announced) return;
    const frame: HostFrame = { type: 'host', room: this.id, device };
    this.#toEveryone(frame);
  }

  deliver(frame: Buffer, to: string | undefined, position: number): void {
    // A closing receiver cannot take it: it departs now, with this frame as its first unsent
    // one, so the broker keeps it (the stream position says from where) instead of skipping it.
    if (to !== undefined) {
      const receiver = this.members.get(to);
      if (receiver === undefined) return;
      if (isClosing(receiver)) this.drop(receiver, [{ frame, position }]);
      else receiver.queue.send(frame, position);
      return;
    }
    let closing: Connection[] | undefined;
    for (const member of this.members.values()) {
      if (isClosing(member)) {
        closing ??= [];
        closing.push(member);
      } else {
        member.queue.send(frame, position);
      }
    }
    if (closing !== undefined) {
      for (const member of closing) this.drop(member, [{ frame, position }]);
    }
  }

  replaced(device: string): readonly UnsentFrame[] {
    const conn = this.members.get(device);
    if (conn === undefined) return [];
    this.#remove(conn);
    // what it had queued reaches the device on its new node
    const unsent = routedUnsent(conn);
    this.#context.metrics.replaced++;
    closeWith(conn, Replaced);
    return unsent;
  }

  // ---- inside ----

  /** The line registered the join: `joined`, then what was kept for the device. */
  #admit(pending: PendingJoin, admission: Admission): void {
    const { conn } = pending;
    // in the older connection's place, if any: same position, same role
    this.members.set(conn.deviceKey, conn);
    this.#findHost();
    const joined = sendAdmission(this.id, this.#records, pending, admission);
    this.#context.logger.debug(
      { room: this.id, device: conn.deviceKey, role: joined.role, buffered: joined.buffered },
      'joined',
    );
  }

  /** The line refused the join: closed with 1013; the older connection's queue is kept. */
  #refuse({ conn, carried }: PendingJoin): void {
    leaveRoom(conn);
    // the older connection it was to replace is gone too
    if (this.members.get(conn.deviceKey)?.room !== this) this.members.delete(conn.deviceKey);
    this.#findHost();
    for (const { frame } of carried) this.#line.sendTo(conn.deviceKey, frame);
    closeWith(conn, JoinsUnavailable);
  }

  /** Takes a connection out of the room; false when it is not in it (replaced, or gone). */
  #remove(conn: Connection): boolean {
    if (conn.room !== this) return false;
    leaveRoom(conn);
    const here = this.members.get(conn.deviceKey);
    // `here` is `conn`, or the older connection `conn` was to replace when its join completed
    if (here === conn || here?.room !== this) this.members.delete(conn.deviceKey);
    this.#findHost();
    return true;
  }

  /** Points `host` at the host's connection, when it is here. */
  #findHost(): void {
    const hostKey = this.#records.hostKey;
    this.host = hostKey === undefined ? undefined : this.members.get(hostKey);
  }

  #toEveryone(frame: object, except?: Connection): Buffer {
    const data = Buffer.from(JSON.stringify(frame));
    for (const member of this.members.values()) {
      if (member !== except) member.queue.send(data);
    }
    return data;
  }

  /**
   * Where a routed frame goes: a connection here, a device key for the broker, or everyone else.
   * Undefined when refused; the sender got the error frame.
   */
  #target(conn: Connection, to: RouteTarget): Target | undefined {
    const { metrics } = this.#context;
    if (to === 'broadcast') return everyone;
    if (to === 'host') {
      if (this.host !== undefined && this.host !== conn && isClosing(this.host)) {
        this.drop(this.host);
      }
      const host = this.host;
      if (host === conn) {
        sendError(conn, metrics, 'unknown_target', 'you are the host of this room');
        return undefined;
      }
      // the host on another node; with no host at all, nobody is present but the sender's
      // closing peers: nothing to deliver, only to keep
      return host ?? this.#records.hostKey ?? everyone;
    }
    const key = deviceKey(to);
    const direct = this.members.get(key);
    if (direct === conn) {
      sendError(conn, metrics, 'unknown_target', 'no such device in this room');
      return undefined;
    }
    if (direct !== undefined) {
      if (!isClosing(direct)) return direct;
      this.drop(direct);
    }
    return key;
  }

  /** Delivers one routed frame, built once and shared by every receiver and the broker. */
  #forward(conn: Connection, target: Target, frame: Buffer): void {
    const { metrics } = this.#context;
    if (typeof target === 'string') {
      if (!this.#line.sendTo(target, frame)) {
        sendError(conn, metrics, 'unknown_target', 'no such device in this room');
        return;
      }
      metrics.messagesRouted++;
      return;
    }
    metrics.messagesRouted++;
    if (target !== everyone) {
      // a receiver that stopped reading queues it, within the bounds of send-queue.ts
      target.queue.send(frame);
      metrics.messagesDelivered++;
      return;
    }
    let closing: Connection[] | undefined;
    for (const member of this.members.values()) {
      if (member === conn) continue;
      if (isClosing(member)) {
        closing ??= [];
        closing.push(member);
        continue;
      }
      member.queue.send(frame);
      metrics.messagesDelivered++;
    }
    if (closing !== undefined) for (const member of closing) this.drop(member);
    this.#line.broadcast(frame);
  }
}

/** A join handed to the line: its connection, and the older connection's unsent frames. */
export interface PendingJoin {
  conn: Connection;
  carried: UnsentFrame[];
  /** Its device or membership was revoked while the line decided. */
  revoked?: boolean;
}

/**
 * An admitted device's first frames: `joined` (its role, the host and the devices present, from
 * the room's records), then the older connection's unsent frames with their positions in the
 * room's stream, then what the broker kept for it. Returns the `joined` frame.
 */
export function sendAdmission(
  roomId: string,
  records: MemberRecords,
  { conn, carried }: PendingJoin,
  { frames, gap }: Admission,
): JoinedFrame {
  const key = conn.deviceKey;
  const hostKey = records.hostKey ?? key;
  const joined: JoinedFrame = {
    type: 'joined',
    room: roomId,
    device: conn.deviceId,
    role: hostKey === key ? 'host' : 'member',
    host: records.idOf(hostKey) ?? conn.deviceId,
    devices: records.devices(),
    buffered: carried.length + frames.length,
    gap,
  };
  const roles = records.roles();
  if (roles !== undefined) joined.roles = roles;
  conn.queue.send(Buffer.from(JSON.stringify(joined)));
  const replay = frames.map((text) => Buffer.from(text));
  // the replay may exceed relay.maxQueuedBytes on its own: allowed until it is written out
  for (const { frame } of carried) conn.queue.allowReplay(frame.length);
  for (const frame of replay) conn.queue.allowReplay(frame.length);
  for (const { frame, position } of carried) conn.queue.send(frame, position);
  for (const frame of replay) conn.queue.send(frame);
  return joined;
}
