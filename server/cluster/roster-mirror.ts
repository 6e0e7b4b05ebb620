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
import type { NatsLink } from './nats-link.ts';
import type { NodeLiveness } from './node-liveness.ts';
import { type BucketChange, watchBucket } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';
import {
  parseRosterKey,
  RoomRoster,
  type RosterChange,
  type RosterEntry,
  rosterBucket,
  rosterKey,
} from './roster.ts';

/** Roster entries are kept a day, so a device that comes back late learns of its `gap`. */
export const rosterRetentionMs = 24 * 60 * 60 * 1000;

/** How long a roster write is tried again while NATS does not take it. */
const writeRetryMs = 30_000;

export interface RosterMirrorOptions {
  node: string;
  logger: Logger;
  now: () => number;
  replicas: number;
  link: NatsLink;
  liveness: NodeLiveness;
  /** Seals the entries this node writes; entries without a valid seal are dropped. */
  seal: RecordSeal;
  /**
   * An entry changed a room's roster (here or on another node): the broker hands it to the room's
   * line, when this node holds the room. The mirror keeps the roster; the line decides what the
   * change means for its devices and its room.
   */
  changed(hash: string, device: string, entry: RosterEntry, change: RosterChange): void;
}

/**
 * This node's copy of the roster bucket: every room's devices, kept current by a watch of the
 * bucket (made again after any loss), the JetStream handles opened with it, this node's own
 * writes, and the marking of the devices of dead nodes as absent.
 */
export class RosterMirror {
  readonly rosters = new Map<string, RoomRoster>();
  /** The JetStream handles, once the bucket is open. */
  js: JetStreamClient | undefined;
  jsm: JetStreamManager | undefined;
  /** True once the whole bucket was read: joins can be taken. */
  loaded = false;
  readonly #options: RosterMirrorOptions;
  #kv: KV | undefined;
  #stopWatch: (() => void) | undefined;
  #closed = false;
  /** The newest write asked for each roster key (a counter): older ones still retrying give way. */
  readonly #newest = new Map<string, number>();
  /**
   * Entries this node applied before NATS took them (a departure), by roster key, until its
   * write is taken: the bucket may still send this node's older writes of the key meanwhile (its
   * watch lags across a NATS failover), which must not put back a device that left here.
   */
  readonly #heldHere = new Map<string, number>();
  #writes = 0;

  constructor(options: RosterMirrorOptions) {
    this.#options = options;
  }

  rosterOf(hash: string): RoomRoster {
    let roster = this.rosters.get(hash);
    if (roster === undefined) {
      roster = new RoomRoster();
      this.rosters.set(hash, roster);
    }
    return roster;
  }

  /** Applies an entry to the mirror; a change is reported to `changed`. */
  applyEntry(hash: string, device: string, entry: RosterEntry, revision: number): void {
    const change = this.rosterOf(hash).apply(device, entry, revision);
    if (change !== undefined) this.#options.changed(hash, device, entry, change);
  }

  /**
   * Reads a device's entry from the bucket itself and applies it: this node's copy follows the
   * bucket and may not have it yet (a device that joined or dropped on another node moments ago,
   * or seconds ago across a NATS failover).
   */
  async read(hash: string, device: string): Promise<void> {
    if (this.#kv === undefined) throw new Error('not connected to NATS');
    const key = rosterKey(hash, device);
    const found = await this.#kv.get(key);
    if (found === null || found.operation !== 'PUT') return;
    const text = this.#options.seal.openText('roster', key, found.value);
    if (text === undefined) return;
    this.applyEntry(hash, device, JSON.parse(text) as RosterEntry, found.revision);
  }

  /** Applies an entry this node decided before writing it (see `#heldHere`). */
  applyHere(hash: string, device: string, entry: RosterEntry): void {
    // held until a write asked for after it is taken
    this.#heldHere.set(rosterKey(hash, device), this.#writes);
    this.applyEntry(hash, device, entry, 0);
  }

  /**
   * Writes an entry and applies it; resolves with its revision. Tried again while NATS does not
   * take it (a NATS cluster electing the bucket's leader after losing a server) for up to
   * {@link writeRetryMs}, unless a newer write of the same device was asked for meanwhile: a
   * departure not recorded would leave the device present for the other nodes.
   */
  async write(hash: string, device: string, entry: RosterEntry): Promise<number> {
    const key = rosterKey(hash, device);
    const mine = ++this.#writes;
    this.#newest.set(key, mine);
    const until = Date.now() + writeRetryMs;
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          if (this.#kv === undefined) throw new Error('not connected to NATS');
          const sealed = this.#options.seal.seal('roster', key, JSON.stringify(entry));
          const revision = await this.#kv.put(key, sealed);
          if ((this.#heldHere.get(key) ?? mine) < mine) this.#heldHere.delete(key);
          this.applyEntry(hash, device, entry, revision);
          return revision;
        } catch (err: unknown) {
          if (this.#closed || this.#newest.get(key) !== mine || Date.now() >= until) throw err;
          await pause(250 * Math.min(attempt, 4));
        }
      }
    } finally {
      if (this.#newest.get(key) === mine) this.#newest.delete(key);
    }
  }

  /**
   * Opens the roster bucket on a (re)connect (again until JetStream answers: a NATS cluster may
   * still be electing its leaders) and follows it (the watch is made again by itself after any
   * loss).
   */
  async follow(nc: NatsConnection): Promise<void> {
    const { logger, replicas } = this.#options;
    let js: JetStreamClient;
    for (let attempt = 1; ; attempt++) {
      try {
        js = jetstream(nc);
        this.js = js;
        this.jsm = await jetstreamManager(nc);
        const kv = await new Kvm(nc).create(rosterBucket, {
          history: 1,
          ttl: rosterRetentionMs,
          replicas,
          // `read` asks the stream's leader, never a replica that may be behind (see Handover).
          allow_direct: false,
        });
        this.#kv = kv;
        // an empty bucket has no last entry to mark the first read done
        if (!this.loaded && (await kv.status()).values === 0) this.loaded = true;
        break;
      } catch (err: unknown) {
        if (this.#closed || nc.isClosed()) throw err;
        logger.warn({ err: String(err), attempt }, 'cluster: roster bucket not ready, again');
        await pause(500 * Math.min(attempt, 4));
      }
    }
    if (this.#stopWatch !== undefined || this.#closed) return;
    this.#stopWatch = watchBucket(
      js,
      rosterBucket,
      'last-per-subject',
      (change) => this.#apply(change),
      (err) => {
        logger.warn({ err: String(err) }, 'cluster: following the roster again');
      },
    );
  }

  /** Applies a roster change; the last of the bucket's first read marks the roster loaded. */
  #apply(change: BucketChange): void {
    const { seal, logger } = this.#options;
    const key = parseRosterKey(change.key);
    const text =
      key !== undefined && change.operation === 'PUT'
        ? seal.openText('roster', change.key, change.value)
        : undefined;
    if (key !== undefined && text !== undefined) {
      try {
        const entry = JSON.parse(text) as RosterEntry;
        if (!this.#olderHere(change.key, entry))
          this.applyEntry(key[0], key[1], entry, change.revision);
      } catch (err: unknown) {
        logger.warn({ err: String(err), key: change.key }, 'cluster: unreadable roster entry');
      }
    }
    if (change.pending === 0) this.loaded = true;
  }

  /**
   * Whether `entry`, heard from the bucket, is an older write of this node's for a key whose
   * newer entry this node holds applied and not yet written (another node's is newer news).
   */
  #olderHere(key: string, entry: RosterEntry): boolean {
    if (!this.#heldHere.has(key)) return false;
    if (entry.node === this.#options.node) return true;
    this.#heldHere.delete(key);
    return false;
  }

  /** Devices of nodes that stopped beating are absent: whichever node notices first records it. */
  markDeadNodes(): void {
    const { node, link, liveness, now, seal } = this.#options;
    const bucket = this.#kv;
    if (bucket === undefined || !link.connected) return;
    for (const [hash, roster] of this.rosters) {
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
          .then((revision) => this.applyEntry(hash, device, absent, revision))
          .catch(() => {});
      }
    }
  }

  close(): void {
    this.#closed = true;
    this.#stopWatch?.();
  }
}
