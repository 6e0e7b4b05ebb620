import { createHash } from 'node:crypto';
import type { DeviceId } from '../../protocol/relay-frames.ts';
import type { MemberRole } from '../../protocol/room-grant.ts';
import type { DepartureReason } from '../relay/broker.ts';

/** The KV bucket of every room's devices across the cluster: key `<room hash>.<device hex>`. */
export const rosterBucket = 'sync-host-roster';

/** One device of one room as the cluster records it. */
export interface RosterEntry {
  /** The device id as its client wrote it in its join. */
  id: DeviceId;
  /** The node holding its connection (present), or the node it dropped from (absent). */
  node: string;
  /** `left` entries are the record of a leave or revocation: nothing is kept for them. */
  state: 'present' | 'absent' | 'left';
  reason?: DepartureReason;
  /** Join order (the KV revision of its join); 0 on the join write itself: its own revision. */
  order: number;
  /** Absent: the last stream sequence its node had delivered when it dropped; -1 unknown. */
  cursor: number;
  /** Absent: its node's publication counter when it dropped (what that node sent it directly). */
  nodeSeq: number;
  /** Absent: when it dropped (ms). */
  droppedAt: number;
  /** A member's device in a shared project's room: its role (absent: the owner's device). */
  role?: MemberRole;
}

/** An entry with its KV revision and its effective join order. */
export interface Stored {
  entry: RosterEntry;
  revision: number;
  order: number;
}

/** A short stable name for a room in subjects, stream names and keys. */
export function roomHash(roomId: string): string {
  return createHash('sha256').update(roomId).digest('hex').slice(0, 24);
}

export function rosterKey(hash: string, device: string): string {
  return `${hash}.${Buffer.from(device, 'utf8').toString('hex')}`;
}

/** `[room hash, device key]` of a roster key; undefined for a malformed one. */
export function parseRosterKey(key: string): [string, string] | undefined {
  const dot = key.indexOf('.');
  if (dot <= 0) return undefined;
  return [key.slice(0, dot), Buffer.from(key.slice(dot + 1), 'hex').toString('utf8')];
}

/** What changed in a room when one entry changed, as the relay's rooms must hear it. */
export interface RosterChange {
  joined?: DeviceId;
  /** The joined device's role when it is a member's. */
  joinedRole?: MemberRole;
  left?: { id: DeviceId; reason: DepartureReason };
  /** The device's connection on `from` is replaced by one on another node. */
  moved?: { device: string; from: string };
  /** The host left and this device is host now. */
  newHost?: DeviceId;
}

/** One room's devices in the cluster: present ones in join order, absent ones kept for. */
export class RoomRoster {
  readonly devices = new Map<string, Stored>();

  /** The roles of the present devices that are not the owner's, by key. */
  roles(): Record<string, MemberRole> {
    const roles: Record<string, MemberRole> = {};
    for (const [key, stored] of this.devices) {
      const { state, role } = stored.entry;
      if (state === 'present' && role !== undefined) roles[key] = role;
    }
    return roles;
  }

  /** Present devices by join order (the first is the host). */
  present(): Array<[string, Stored]> {
    const list: Array<[string, Stored]> = [];
    for (const pair of this.devices) if (pair[1].entry.state === 'present') list.push(pair);
    return list.sort((a, b) => a[1].order - b[1].order);
  }

  hostKey(): string | undefined {
    let best: [string, Stored] | undefined;
    for (const pair of this.devices) {
      if (pair[1].entry.state !== 'present') continue;
      if (best === undefined || pair[1].order < best[1].order) best = pair;
    }
    return best?.[0];
  }

  /**
   * Applies a newer entry (older revisions are ignored; `revision` 0 is this node's own write,
   * applied before NATS answered) and returns what the room's devices must hear.
   */
  apply(device: string, entry: RosterEntry, revision: number): RosterChange | undefined {
    const before = this.devices.get(device);
    if (before !== undefined && revision !== 0 && revision <= before.revision) return undefined;
    const hostBefore = this.hostKey();
    const order = entry.order > 0 ? entry.order : revision > 0 ? revision : Number.MAX_SAFE_INTEGER;
    this.devices.set(device, {
      entry,
      revision: revision === 0 ? (before?.revision ?? 0) : revision,
      order,
    });
    const was = before?.entry.state === 'present';
    const is = entry.state === 'present';
    const change: RosterChange = {};
    if (!was && is) {
      change.joined = entry.id;
      if (entry.role !== undefined) change.joinedRole = entry.role;
    }
    if (was && is && before !== undefined && before.entry.node !== entry.node) {
      change.moved = { device, from: before.entry.node };
    }
    if (was && !is) {
      change.left = {
        id: entry.id,
        reason: entry.state === 'absent' ? 'disconnect' : (entry.reason ?? 'leave'),
      };
    }
    const hostAfter = this.hostKey();
    if (hostBefore !== undefined && hostAfter !== undefined && hostBefore !== hostAfter) {
      const stillThere = this.devices.get(hostBefore)?.entry.state === 'present';
      if (!stillThere) change.newHost = this.devices.get(hostAfter)?.entry.id;
    }
    return change;
  }
}
