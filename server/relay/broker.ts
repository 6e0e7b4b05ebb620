import type { DeviceId } from '../../protocol/relay-frames.ts';
import type { MemberRole, ProjectRole } from '../../protocol/room-grant.ts';
import type { UnsentFrame } from './send-queue.ts';

export type { UnsentFrame };

/**
 * The broker: everything a room does beyond the connections it holds on this process. A room
 * (`room.ts`) delivers to its own connections; the room-wide record (who is present on any node,
 * in join order, who is host, who dropped and is kept for) and every message for a device that has
 * no connection here go through its `RoomLine`. The broker tells the room what happened beyond it
 * through the room's `RoomListener`.
 *
 * In-process (`local-broker.ts`, the single-node relay): the roster is a Map in this process, and a
 * message for a device that is not connected is kept in the SQLite buffer, which this broker
 * opens and owns, while the device is absent. In a cluster (`../cluster/cluster-broker.ts`, NATS
 * JetStream) the roster and host election are a key-value bucket mirrored in every node, messages
 * for devices on other nodes or absent go to a per-room stream, and a device that rejoins on any
 * node is replayed the stream from where it had reached; the other nodes' joins, departures, new
 * hosts and messages reach the room through the same listener. Both pass one contract suite
 * (`test/relay/broker-contract.test.ts`).
 *
 * Every routing call is synchronous and returns at once (a cluster broker publishes without
 * awaiting the acknowledgement on this path); joins may complete later (`RoomListener.admitted`).
 */
export interface Broker {
  /** Opens room `roomId`'s line; `listener` hears what happens in the room beyond this process. */
  open(roomId: string, listener: RoomListener): RoomLine;
  /** A device was revoked: nothing is kept for it in any room, and its tokens stay refused. */
  revoke(device: string, revokedAt: number): void;
  /**
   * The Unix second a device (by key) was revoked at, or undefined: the relay refuses its tokens
   * issued up to then. The broker alone keeps the revocations (`revoke` adds one).
   */
  revokedAt(device: string): number | undefined;
  /**
   * The relay's periodic sweep: forgets devices whose buffer window passed (they get `gap` when
   * they come back) and tidies what the broker keeps.
   */
  sweep(): void;
  /** Devices kept for (dropped without leave, within their window), in every room. */
  absentDevices(): number;
  /**
   * False while the broker cannot take joins (a cluster node cut off from NATS): a join is then
   * closed with 1013 and the client retries later.
   */
  accepting(): boolean;
  /**
   * Resolves once every frame handed to the broker so far is stored (a cluster broker: NATS
   * acknowledged its publication, or refused it); undefined when nothing is in flight. The relay
   * answers a `ping` only then, so a `pong` confirms that what was sent before the ping is kept.
   */
  settled(): Promise<void> | undefined;
  /**
   * Like `settled`, for a `ping` of the device `device` in room `room`: resolves false when a
   * frame it sent could not be stored since its previous call (the relay then closes the
   * connection instead of answering, so the client sends again what was not confirmed);
   * undefined when nothing of it is in flight.
   */
  stored(room: string, device: string): Promise<boolean> | undefined;
  /** False while what the broker keeps cannot be written (`/health` answers 503). */
  healthy(): boolean;
  /** What `/health` and `/metrics` show of the broker. */
  describe(): BrokerReport;
  /** Shutdown, after the rooms dropped everything: releases what the broker holds. */
  close(): Promise<void>;
}

/** What the broker keeps for absent devices on this process, and what it adds to the status. */
export interface BrokerReport {
  /** Frames kept, written and still to be written. */
  stored: number;
  pending: number;
  /** Bytes of the frames kept, and of the files that keep them. */
  bytes: number;
  fileBytes: number;
  /** Fields added to `/health`. */
  health: Record<string, unknown>;
  /** Lines added to `/metrics`. */
  metrics: string;
}

/** Why a device is no longer present: `leave` and `revoked` keep nothing, `disconnect` does. */
export type DepartureReason = 'leave' | 'disconnect' | 'revoked';

/**
 * A join of this process registered by the broker: the room's present devices at that moment (in
 * join order, the joining one among them) and its host, then what was kept for the device, in
 * order, and whether some was lost (`gap`).
 */
export interface Admission {
  devices: readonly DeviceId[];
  /** The roles of the devices present that are not the owner's, by key (teams). */
  roles: Readonly<Record<string, MemberRole>>;
  hostKey: string;
  frames: readonly string[];
  gap: boolean;
}

/** One room as the broker sees it; every device is named by its key (`deviceKey`). */
export interface RoomLine {
  /**
   * A device of this process joins; `ticket` names this attempt in the answer, which is exactly
   * one of the listener's `admitted` and `refused` (the in-process broker admits during the call
   * and never refuses; a cluster broker answers once the join is registered and its replay read).
   * A device already present (a reconnect replacing its older connection) keeps its place and
   * role and nobody hears of it; a new one is put last (host if first) and heard as `joined`.
   * Until the answer the room sends the device nothing itself and hands messages for it to
   * `sendTo`, so none overtakes its replay.
   */
  join(device: DeviceId, ticket: number, role?: ProjectRole): void;
  /**
   * A device of this process is gone for `reason`; the listener hears `left` (and `host`).
   * `unsent`: the routed frames its connection had queued and never written, in order; for a
   * `disconnect` they are kept for the device before anything routed to it from now on.
   */
  depart(device: string, reason: DepartureReason, unsent: readonly UnsentFrame[]): void;
  /**
   * A direct message for a device with no connection here: on another node, or absent and kept
   * for. False when the room has no such device (the sender gets `unknown_target`).
   */
  sendTo(device: string, frame: Buffer): boolean;
  /** The part of a broadcast for the devices with no connection here. */
  broadcast(frame: Buffer): void;
  /**
   * A frame of the relay's own (`{"type"…`, never routed: `chunks-lost`) for the devices present
   * with no connection here; kept for nobody (a device absent now does not get it when it
   * rejoins). The in-process broker has no such device: it does nothing. A cluster line
   * publishes it to the room's stream, and every other node holding the room hands it to its
   * devices through `RoomListener.deliver` (`to` undefined).
   */
  notice(frame: Buffer): void;
  /**
   * Shutdown: every device of this process becomes absent at once, and nobody hears of it;
   * `unsent` holds, by device key, the routed frames each connection had not written (as `depart`).
   */
  dropAll(unsent: ReadonlyMap<string, readonly UnsentFrame[]>): void;
  /** The room is no longer held in this process (nobody of it is connected here). */
  release(): void;
}

/**
 * What a room hears from its line: one ordered stream of events, from which the room keeps its
 * own record of the room (present devices in join order, the host). On `open` the line tells the
 * devices already present (`joined`, then `hostChanged`); from then on every change, as it
 * happens. The in-process broker calls these during the room's own calls, a cluster broker also
 * when other nodes change the room.
 */
export interface RoomListener {
  /** Join `ticket` of this process is registered (see `RoomLine.join`). */
  admitted(ticket: number, admission: Admission): void;
  /**
   * Join `ticket` could not be registered (a cluster node that lost JetStream during it): the
   * connection is closed with 1013, the client retries, and nothing of the join is kept.
   */
  refused(ticket: number): void;
  /** A device joined the room (not a replacement), with its role (absent: the owner's). */
  joined(device: DeviceId, role?: MemberRole): void;
  /** A device left the room. */
  left(device: DeviceId, reason: DepartureReason): void;
  /**
   * `device` (the longest connected) is host now. `announced`: the host left and the devices
   * are told; otherwise the room only notes it (the room's first device, or a cluster's join
   * order settled by NATS).
   */
  hostChanged(device: DeviceId, announced: boolean): void;
  /**
   * A routed frame from another node for this room's connections: one device (`to` its key) or
   * every connection here (`to` undefined), at `position` in the room's stream (handed back with
   * the frame if a connection never wrote it, see `RoomLine.depart`). The in-process broker
   * never calls it.
   */
  deliver(frame: Buffer, to: string | undefined, position: number): void;
  /**
   * The device joined again on another node: its connection here is closed with 4009 and
   * nobody hears of it. Returns the routed frames that connection had queued and never written,
   * in order (its new node gets them). The in-process broker never calls it (the room replaces
   * it itself).
   */
  replaced(device: string): readonly UnsentFrame[];
}
