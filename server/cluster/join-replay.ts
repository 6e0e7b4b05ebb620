import { setTimeout as pause } from 'node:timers/promises';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { DeviceId } from '../../protocol/relay-frames.ts';
import type { MemberRole } from '../../protocol/room-grant.ts';
import type { Handover, Origin } from './handover.ts';
import type { LocalDevice } from './joining-devices.ts';
import type { LineNode, RoomLineParts, RoomRosterAccess } from './line-parts.ts';
import { readRange, streamBounds } from './room-stream.ts';
import type { RosterEntry, Stored } from './roster.ts';
import { relaySender } from './stream-record.ts';

/**
 * Where the replay of a device joining on this node starts; undefined for nothing to replay (new
 * or left). A device present on another node is released by that node; one present here is
 * replayed from where the line had handed the stream to the connection this join replaces
 * (`replacing`; the frames after it came to the line while the device was joining), or, with no
 * connection of it here (this node's copy of the roster lags, or the node was restarted), from
 * this node's last recorded position with `gap`.
 */
export async function originOf(
  node: string,
  handover: Handover,
  hash: string,
  joining: Pick<JoiningDevice, 'key' | 'local' | 'replacing'>,
  entry: RosterEntry | undefined,
): Promise<Origin | undefined> {
  const { key, local, replacing } = joining;
  if (entry === undefined || entry.state === 'left') return undefined;
  if (entry.state === 'present' && entry.node !== node) {
    return handover.release(entry.node, hash, key);
  }
  if (entry.state === 'present') {
    if (replacing === undefined) return handover.lostOn(node, hash);
    return { cursor: replacing, node, nodeSeq: local.ownFrom, lost: false };
  }
  if (entry.cursor < 0) return handover.lostOn(entry.node, hash);
  return { cursor: entry.cursor, node: entry.node, nodeSeq: entry.nodeSeq, lost: false };
}

/**
 * What the device `key` gets on its join, from its `origin` up to `bounds.last` of the room's
 * stream: the frames addressed to it (or broadcast by others, unless its old node delivered them
 * directly, or `routedHere` publications after `after` of the joining node, which it queued for
 * the device), and whether some are missing (`gap`: aged out, its node died, or back too late).
 */
export async function replayOf(
  js: JetStreamClient,
  roomId: string,
  key: string,
  origin: Origin,
  entry: RosterEntry | undefined,
  bounds: { first: number; last: number },
  context: Pick<LineNode, 'now' | 'bufferWindowMs' | 'seal'>,
  routedHere: { node: string; after: number },
): Promise<{ frames: string[]; gap: boolean }> {
  if (entry?.state === 'absent' && context.now() >= entry.droppedAt + context.bufferWindowMs) {
    return { frames: [], gap: origin.lost || bounds.last > origin.cursor };
  }
  const aged = bounds.first > origin.cursor + 1 && bounds.last >= bounds.first;
  const from = Math.max(origin.cursor, bounds.first - 1);
  const range = await readRange(js, roomId, from, bounds.last, context.seal);
  const frames: string[] = [];
  for (const f of range) {
    if (f.to !== key && (f.to !== '*' || f.from === key)) continue;
    // a notice of the relay's is for the devices present when it was sent, as on a single node
    if (f.from === relaySender) continue;
    // a broadcast of its old node reached it there directly
    if (f.node === origin.node && f.to === '*' && f.nodeSeq <= origin.nodeSeq) continue;
    // routed on the joining node while it joined: queued for it there (joining-devices.ts)
    if (f.node === routedHere.node && f.nodeSeq > routedHere.after) continue;
    frames.push(f.frame.toString('utf8'));
  }
  return { frames, gap: origin.lost || aged };
}

/**
 * What a node answers another that takes over `entry`'s device, when the device has no
 * connection on it: where the device had reached when it dropped there, or undefined when it
 * did not drop there (nothing of this node's to replay). The entry is this node's copy (or a
 * refused join's write-back not written yet): the other nodes follow the roster with a lag, and
 * NATS may not have taken the departure yet across a failover.
 */
export function droppedOn(
  node: string,
  entry: RosterEntry | undefined,
): { cursor: number; nodeSeq: number } | undefined {
  if (entry?.state !== 'absent' || entry.node !== node || entry.cursor < 0) return undefined;
  return { cursor: entry.cursor, nodeSeq: entry.nodeSeq };
}

/** This node's state that a refused join's undo needs. */
export interface Here {
  node: string;
  /** The last stream sequence this node took from the room's stream. */
  cursor: number;
  /** This node's publication counter. */
  nodeSeq: number;
  now: number;
}

/**
 * What the roster must say again when a join is refused after it may have changed something: the
 * device's entry before the join (`before`) as an absent device kept for from where it had
 * reached (`origin`), since its old connection is gone (released by its node, or replaced
 * here), or `left` for a device that was not in the room. Undefined when nothing must be written:
 * neither the join's write was sent (`written`) nor an old connection was taken.
 */
export function undoOf(
  joinEntry: RosterEntry,
  before: Stored | undefined,
  origin: Origin | undefined,
  written: boolean,
  here: Here,
): RosterEntry | undefined {
  const entry = before?.entry;
  if (entry === undefined || entry.state === 'left') {
    if (!written) return undefined;
    return entry ?? { ...joinEntry, state: 'left', reason: 'leave' };
  }
  if (!written && entry.state !== 'present') return undefined;
  const absent = entry.state === 'absent';
  let cursor = -1;
  if (origin !== undefined) cursor = origin.lost ? -1 : origin.cursor;
  else if (absent) cursor = entry.cursor;
  else if (entry.node === here.node) cursor = here.cursor;
  let nodeSeq = here.nodeSeq;
  if (origin !== undefined) nodeSeq = origin.nodeSeq;
  else if (absent) nodeSeq = entry.nodeSeq;
  return {
    ...entry,
    state: 'absent',
    node: origin?.node ?? entry.node,
    order: before?.order ?? entry.order,
    cursor,
    nodeSeq,
    droppedAt: absent ? entry.droppedAt : here.now,
  };
}

/** A refused join's roster entry is written back this many times at most, this far apart. */
const undoAttempts = 5;
const undoPauseMs = 2_000;

/**
 * Writes back the roster entry of a refused join (a few tries: NATS may be back soon), unless
 * the device joined again meanwhile, here (`stillAway` false) or on another node.
 */
export async function undoJoin(
  node: Pick<LineNode, 'name' | 'logger'>,
  roster: RoomRosterAccess,
  key: string,
  undo: RosterEntry | undefined,
  stillAway: () => boolean,
): Promise<void> {
  if (undo === undefined) return;
  for (let attempt = 1; attempt <= undoAttempts; attempt++) {
    const now = roster.roster.devices.get(key)?.entry;
    if (!stillAway() || (now?.state === 'present' && now.node !== node.name)) return;
    try {
      await roster.write(key, undo);
      return;
    } catch (err: unknown) {
      node.logger.warn({ err: String(err), device: key, attempt }, 'cluster: join not undone');
      await pause(undoPauseMs);
    }
  }
}

/** One join of a device here while it is registered. */
export interface JoinAttempt {
  /** Refused (failed, or past its deadline): the device got 1013. */
  abandoned: boolean;
  /** What to write back in the roster if it is refused; undefined for nothing. */
  undo: RosterEntry | undefined;
}

/** A join being registered: the device, its record on this node, and the attempt. */
export interface JoiningDevice {
  key: string;
  device: DeviceId;
  /** A member's device: its role (absent: the owner's). */
  role?: MemberRole;
  local: LocalDevice;
  attempt: JoinAttempt;
  /**
   * What an earlier join of the device here, refused, left to write back and did not yet: its
   * own write (the device present here) may be in the roster, and must not be taken for a
   * device already present here (nothing replayed, no gap said).
   */
  undone?: RosterEntry | undefined;
  /**
   * The join replaces the device's connection here: up to where the line had handed the room's
   * stream to it (undefined: no connection of the device here).
   */
  replacing?: number | undefined;
}

/**
 * Registers a join in the roster and reads its replay, once the room's stream is open (`ready`).
 * `attempt.undo` says, as soon as the join may have changed the roster, what to write back if it
 * is refused after all.
 */
export async function registerJoin(
  parts: RoomLineParts,
  place: { roomId: string; hash: string; cursor: () => number },
  ready: Promise<void>,
  joining: JoiningDevice,
): Promise<{ frames: string[]; gap: boolean }> {
  const { key, device, local, attempt, role, undone } = joining;
  const { node, nats, publications, roster } = parts;
  await ready;
  const js = nats.js();
  const jsm = nats.jsm();
  if (jsm === undefined || js === undefined) throw new Error('not connected to NATS');
  if (attempt.abandoned) throw new Error('join abandoned');
  // a device this node's copy of the roster does not know may be known to NATS already
  if (undone === undefined && !roster.roster.devices.has(key)) await roster.read(key);
  const known = roster.roster.devices.get(key);
  const before: Stored | undefined =
    undone === undefined
      ? known
      : { entry: undone, revision: known?.revision ?? 0, order: known?.order ?? undone.order };
  const wasPresent = before?.entry.state === 'present';
  const entry: RosterEntry = {
    id: device,
    node: node.name,
    state: 'present',
    order: wasPresent ? before.order : 0,
    cursor: 0,
    nodeSeq: 0,
    droppedAt: 0,
    ...(role !== undefined && { role }),
  };
  const here = () => ({
    node: node.name,
    cursor: place.cursor(),
    nodeSeq: publications.count,
    now: node.now(),
  });
  // an old connection here was replaced already: its entry needs undoing from now on
  attempt.undo = undoOf(entry, before, undefined, false, here());
  const origin = await originOf(node.name, parts.handover, place.hash, joining, before?.entry);
  attempt.undo = undoOf(entry, before, origin, false, here());
  if (attempt.abandoned) throw new Error('join abandoned');
  // a write that fails may still reach NATS: undone in any case
  attempt.undo = undoOf(entry, before, origin, true, here());
  await roster.write(key, entry);
  // what this node published before the join began is in the stream before its bounds are read
  await publications.settled();
  const bounds = await streamBounds(jsm, place.roomId);
  local.upto = bounds.last;
  if (origin === undefined) return { frames: [], gap: false };
  const routedHere = { node: node.name, after: local.ownFrom };
  return replayOf(js, place.roomId, key, origin, before?.entry, bounds, node, routedHere);
}
