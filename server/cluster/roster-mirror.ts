import { setTimeout as pause } from 'node:timers/promises';
import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { RoomListener } from '../relay/broker.ts';
import type { NatsLink } from './nats-link.ts';
import type { NodeLiveness } from './node-liveness.ts';
import { type BucketChange, watchBucket } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';
import { parseRosterKey, RoomRoster, type RosterEntry, rosterBucket, rosterKey } from './roster.ts';

/** Roster entries are kept a day, so a device that comes back late learns of its `gap`. */
export const rosterRetentionMs = 24 * 60 * 60 * 1000;

/** How long a roster write is tried again while NATS does not take it. */
const writeRetryMs = 30_000;

/** What the mirror needs of a room this node holds (its line): its devices here and listener. */
export interface HeldRoom {
  readonly local: Map<string, { pending: boolean }>;
  readonly listener: RoomListener;
}

export interface RosterMirrorOptions {
  node: string;
  logger: Logger;
  now: () => number;
  replicas: number;
  link: NatsLink;
  liveness: NodeLiveness;
  /** Seals the entries this node writes; entries without a valid seal are dropped. */
  seal: RecordSeal;
  /** The room this node holds with that hash, if any. */
  heldRoom(hash: string): HeldRoom | undefined;
}

/**
 * This node's copy of the roster bucket: every room's devices, kept current by a watch of the
 * bucket (made again after any loss), the JetStream handles opened with it, this node's own
 * writes, and the marking of the devices of dead nodes as absent.
 */
export interface RosterMirror {
  readonly rosters: ReadonlyMap<string, RoomRoster>;
  /** The JetStream handles, once the bucket is open. */
  readonly js: JetStreamClient | undefined;
  readonly jsm: JetStreamManager | undefined;
  /** True once the whole bucket was read: joins can be taken. */
  readonly loaded: boolean;
  rosterOf(hash: string): RoomRoster;
  /** Applies an entry to the mirror and tells the room, when this node holds it. */
  applyEntry(hash: string, device: string, entry: RosterEntry, revision: number): void;
  /** Writes an entry to the bucket and applies it; resolves with its revision. */
  write(hash: string, device: string, entry: RosterEntry): Promise<number>;
  /** Opens the bucket on a (re)connect and follows it. */
  follow(nc: NatsConnection): Promise<void>;
  /** Devices of nodes that stopped beating are absent: whichever node notices first records it. */
  markDeadNodes(): void;
  close(): void;
}

export function createRosterMirror(options: RosterMirrorOptions): RosterMirror {
  const { node, logger, now, replicas, link, liveness, heldRoom, seal } = options;
  const rosters = new Map<string, RoomRoster>();
  let kv: KV | undefined;
  let js: JetStreamClient | undefined;
  let jsm: JetStreamManager | undefined;
  let loaded = false;
  let stopWatch: (() => void) | undefined;
  let closed = false;
  /** The newest write asked for each roster key (a counter): older ones still retrying give way. */
  const newest = new Map<string, number>();
  let writes = 0;

  function rosterOf(hash: string): RoomRoster {
    let roster = rosters.get(hash);
    if (roster === undefined) {
      roster = new RoomRoster();
      rosters.set(hash, roster);
    }
    return roster;
  }

  function applyEntry(hash: string, device: string, entry: RosterEntry, revision: number): void {
    const change = rosterOf(hash).apply(device, entry, revision);
    const room = heldRoom(hash);
    if (change === undefined || room === undefined) return;
    const listener = room.listener;
    if (
      change.moved !== undefined &&
      change.moved.from === node &&
      entry.node !== node &&
      room.local.has(device)
    ) {
      room.local.delete(device);
      listener.replaced(device);
    }
    const mine = room.local.get(device);
    if (entry.state === 'absent' && entry.node === node && mine !== undefined && !mine.pending) {
      // Marked dead by another node while cut off from NATS: the device is still here.
      void write(hash, device, { ...entry, state: 'present', order: 0, cursor: 0 }).catch(() => {});
    }
    if (change.joined !== undefined) listener.joined(change.joined);
    if (change.left !== undefined) listener.left(change.left.id, change.left.reason);
    if (change.newHost !== undefined) listener.hostChanged(change.newHost);
  }

  /**
   * Writes an entry, again while NATS does not take it (a NATS cluster electing the bucket's
   * leader after losing a server) for up to {@link writeRetryMs}, unless a newer write of the
   * same device was asked for meanwhile: a departure not recorded would leave the device
   * present for the other nodes.
   */
  async function write(hash: string, device: string, entry: RosterEntry): Promise<number> {
    const key = rosterKey(hash, device);
    const mine = ++writes;
    newest.set(key, mine);
    const until = Date.now() + writeRetryMs;
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          if (kv === undefined) throw new Error('not connected to NATS');
          const revision = await kv.put(key, seal.seal('roster', key, JSON.stringify(entry)));
          applyEntry(hash, device, entry, revision);
          return revision;
        } catch (err: unknown) {
          if (closed || newest.get(key) !== mine || Date.now() >= until) throw err;
          await pause(250 * Math.min(attempt, 4));
        }
      }
    } finally {
      if (newest.get(key) === mine) newest.delete(key);
    }
  }

  /**
   * Opens the roster bucket (again until JetStream answers: a NATS cluster may still be electing
   * its leaders) and follows it (the watch is made again by itself after any loss).
   */
  async function follow(nc: NatsConnection): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        js = jetstream(nc);
        jsm = await jetstreamManager(nc);
        kv = await new Kvm(nc).create(rosterBucket, {
          history: 1,
          ttl: rosterRetentionMs,
          replicas,
        });
        // an empty bucket has no last entry to mark the first read done
        if (!loaded && (await kv.status()).values === 0) loaded = true;
        break;
      } catch (err: unknown) {
        if (closed || nc.isClosed()) throw err;
        logger.warn({ err: String(err), attempt }, 'cluster: roster bucket not ready, again');
        await pause(500 * Math.min(attempt, 4));
      }
    }
    if (stopWatch !== undefined || closed) return;
    stopWatch = watchBucket(js, rosterBucket, 'last-per-subject', apply, (err) => {
      logger.warn({ err: String(err) }, 'cluster: following the roster again');
    });
  }

  /** Applies a roster change; the last of the bucket's first read marks the roster loaded. */
  function apply(change: BucketChange): void {
    const key = parseRosterKey(change.key);
    const text =
      key !== undefined && change.operation === 'PUT'
        ? seal.openText('roster', change.key, change.value)
        : undefined;
    if (key !== undefined && text !== undefined) {
      try {
        const entry = JSON.parse(text) as RosterEntry;
        applyEntry(key[0], key[1], entry, change.revision);
      } catch (err: unknown) {
        logger.warn({ err: String(err), key: change.key }, 'cluster: unreadable roster entry');
      }
    }
    if (change.pending === 0) loaded = true;
  }

  function markDeadNodes(): void {
    const bucket = kv;
    if (bucket === undefined || !link.connected) return;
    for (const [hash, roster] of rosters) {
      for (const [device, stored] of roster.devices) {
        const { entry } = stored;
        if (entry.state !== 'present' || entry.node === node || liveness.alive(entry.node))
          continue;
        const absent: RosterEntry = {
          ...entry,
          state: 'absent',
          order: stored.order,
          cursor: -1,
          droppedAt: now(),
        };
        const key = rosterKey(hash, device);
        bucket
          .update(key, seal.seal('roster', key, JSON.stringify(absent)), stored.revision)
          .then((revision) => applyEntry(hash, device, absent, revision))
          .catch(() => {});
      }
    }
  }

  return {
    rosters,
    get js() {
      return js;
    },
    get jsm() {
      return jsm;
    },
    get loaded() {
      return loaded;
    },
    rosterOf,
    applyEntry,
    write,
    follow,
    markDeadNodes,
    close() {
      closed = true;
      stopWatch?.();
    },
  };
}
