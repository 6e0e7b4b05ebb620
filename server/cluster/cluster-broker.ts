import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type DeviceId, deviceKey } from '../../protocol/relay-frames.ts';
import type { Logger } from '../log.ts';
import type { Broker, DepartureReason, Replay, RoomLine, RoomListener } from '../relay/broker.ts';
import { Handover, type Origin, positionEveryMs } from './handover.ts';
import { openNatsLink } from './nats-link.ts';
import { watchNodes } from './node-liveness.ts';
import {
  ensureStream,
  followStream,
  publishFrame,
  readRange,
  type StreamFrame,
  senderOf,
  streamBounds,
} from './room-stream.ts';
import {
  parseRosterKey,
  RoomRoster,
  type RosterEntry,
  roomHash,
  rosterBucket,
  rosterKey,
} from './roster.ts';

export interface ClusterBrokerOptions {
  /** NATS server URLs (`cluster.nats`). */
  urls: readonly string[];
  /** This node's name (`cluster.node`). */
  node: string;
  /** `buffer.seconds` in ms: the retention of each room's stream. */
  bufferWindowMs: number;
  logger: Logger;
  now?: () => number;
}

/** A device of this node in a held room. */
interface LocalDevice {
  /** Its join is being registered and its replay read: frames from the stream wait. */
  pending: boolean;
  queue: StreamFrame[];
  /** Frames up to this stream sequence reached it by its replay (or predate its join). */
  upto: number;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Tries to open a room's stream (about 30 s in all) before its joins fail. */
const openAttempts = 20;

/** Roster entries are kept a day, so a device that comes back late learns of its `gap`. */
const rosterRetentionMs = 24 * 60 * 60 * 1000;

/**
 * The cluster broker (NATS JetStream): the roster of every room is a KV bucket mirrored in every
 * node (join order, host = the longest present, absent devices with the stream position they
 * reached); every routed frame for a device on another node, or absent, goes to the room's own
 * stream (retention `buffer.seconds`), which every node holding the room follows; a device that
 * rejoins on any node gets, from the stream, what it had not received.
 */
export function createClusterBroker(options: ClusterBrokerOptions): Broker {
  const { node, logger, bufferWindowMs } = options;
  const now = options.now ?? Date.now;
  const replicas = options.urls.length >= 3 ? 3 : 1;
  const link = openNatsLink(options.urls, `sync-host relay ${node}`, logger);
  const rosters = new Map<string, RoomRoster>();
  const lines = new Map<string, ClusterRoomLine>();
  let kv: KV | undefined;
  let js: JetStreamClient | undefined;
  let jsm: JetStreamManager | undefined;
  let rosterLoaded = false;
  let nodeSeq = 0;
  /** Publications not yet answered by NATS. */
  const inFlight = new Set<Promise<void>>();
  const counters = { published: 0, publishFailures: 0, received: 0, replayed: 0 };
  const liveness = watchNodes(link, node, logger, now, replicas);
  const handover = new Handover(node, replicas, rosterRetentionMs, logger);

  function rosterOf(hash: string): RoomRoster {
    let roster = rosters.get(hash);
    if (roster === undefined) {
      roster = new RoomRoster();
      rosters.set(hash, roster);
    }
    return roster;
  }

  /** Applies an entry to the mirror and tells the room's line, when this node holds the room. */
  function applyEntry(hash: string, device: string, entry: RosterEntry, revision: number): void {
    const change = rosterOf(hash).apply(device, entry, revision);
    const line = lines.get(hash);
    if (change === undefined || line === undefined) return;
    const listener = line.listener;
    if (
      change.moved !== undefined &&
      change.moved.from === node &&
      entry.node !== node &&
      line.local.has(device)
    ) {
      line.local.delete(device);
      listener.replaced(device);
    }
    const mine = line.local.get(device);
    if (entry.state === 'absent' && entry.node === node && mine !== undefined && !mine.pending) {
      // Marked dead by another node while cut off from NATS: the device is still here.
      void write(hash, device, { ...entry, state: 'present', order: 0, cursor: 0 }).catch(() => {});
    }
    if (change.joined !== undefined) listener.joined(change.joined);
    if (change.left !== undefined) listener.left(change.left.id, change.left.reason);
    if (change.newHost !== undefined) listener.hostChanged(change.newHost);
  }

  async function write(hash: string, device: string, entry: RosterEntry): Promise<number> {
    if (kv === undefined) throw new Error('not connected to NATS');
    const revision = await kv.put(rosterKey(hash, device), JSON.stringify(entry));
    applyEntry(hash, device, entry, revision);
    return revision;
  }

  let watchingRoster = false;
  let closed = false;

  /**
   * Opens the roster bucket (again until JetStream answers: a NATS cluster may still be electing
   * its leaders) and follows it; a watch that ends (a NATS server lost) is started again.
   */
  async function followRoster(nc: NatsConnection): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        js = jetstream(nc);
        jsm = await jetstreamManager(nc);
        kv = await new Kvm(nc).create(rosterBucket, {
          history: 1,
          ttl: rosterRetentionMs,
          replicas,
        });
        break;
      } catch (err: unknown) {
        if (closed || nc.isClosed()) throw err;
        logger.warn({ err: String(err), attempt }, 'cluster: roster bucket not ready, again');
        await pause(500 * Math.min(attempt, 4));
      }
    }
    if (watchingRoster) return;
    watchingRoster = true;
    try {
      while (!closed && !nc.isClosed()) {
        await watchRoster(kv);
        if (!closed) await pause(500);
      }
    } finally {
      watchingRoster = false;
    }
  }

  /** The positions bucket and the release answers, again until JetStream answers. */
  async function openPositions(nc: NatsConnection): Promise<void> {
    for (let attempt = 1; !closed && !nc.isClosed(); attempt++) {
      try {
        await handover.connected(nc, release);
        return;
      } catch (err: unknown) {
        logger.warn({ err: String(err), attempt }, 'cluster: positions bucket not ready, again');
        await pause(500 * Math.min(attempt, 4));
      }
    }
  }

  /** Applies every roster entry until the watch ends; the first one marks the roster loaded. */
  async function watchRoster(bucket: KV): Promise<void> {
    try {
      const initial = rosterLoaded ? 0 : (await bucket.status()).values;
      let received = 0;
      if (initial === 0) rosterLoaded = true;
      for await (const e of await bucket.watch()) {
        const key = parseRosterKey(e.key);
        if (key !== undefined && e.operation === 'PUT') {
          try {
            applyEntry(key[0], key[1], JSON.parse(e.string()) as RosterEntry, e.revision);
          } catch (err: unknown) {
            logger.warn({ err: String(err), key: e.key }, 'cluster: unreadable roster entry');
          }
        }
        if (++received >= initial) rosterLoaded = true;
      }
    } catch (err: unknown) {
      logger.warn({ err: String(err) }, 'cluster: roster watch failed');
    }
    if (!closed) logger.warn('cluster: following the roster again');
  }

  link.onConnected((nc) => {
    followRoster(nc).catch((err: unknown) => {
      logger.error({ err: String(err) }, 'cluster: cannot follow the roster');
    });
    void openPositions(nc);
  });

  /**
   * Another node takes a device of this node over: its connection here is closed (4009) and
   * the answer says up to where the room's stream and this node's own publications reached it.
   */
  function release(hash: string, device: string): { cursor: number; nodeSeq: number } | null {
    const line = lines.get(hash);
    const local = line?.local.get(device);
    if (line === undefined || local === undefined || local.pending) return null;
    line.local.delete(device);
    line.listener.replaced(device);
    return { cursor: Math.max(line.cursor, local.upto), nodeSeq };
  }

  /** Records the position of each room with devices here, so a kill -9 of this node loses nothing. */
  const positions = setInterval(() => {
    if (!link.connected) return;
    for (const line of lines.values()) line.recordPosition();
  }, positionEveryMs);
  positions.unref();

  /** Devices of nodes that stopped beating are absent: whichever node notices first records it. */
  function markDeadNodes(): void {
    if (kv === undefined || !link.connected) return;
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
        kv.update(rosterKey(hash, device), JSON.stringify(absent), stored.revision)
          .then((revision) => applyEntry(hash, device, absent, revision))
          .catch(() => {});
      }
    }
  }
  const deadNodeCheck = setInterval(markDeadNodes, 1_000);
  deadNodeCheck.unref();

  class ClusterRoomLine implements RoomLine {
    readonly local = new Map<string, LocalDevice>();
    /** The last stream sequence this node took from the room's stream. */
    cursor = 0;
    /** The last `cursor` recorded in NATS. */
    #recorded = 0;
    readonly ready: Promise<void>;
    #stop: (() => void) | undefined;
    #released = false;

    constructor(
      readonly roomId: string,
      readonly hash: string,
      readonly listener: RoomListener,
    ) {
      this.ready = this.#start();
      this.ready.catch((err: unknown) => {
        logger.error({ err: String(err), room: roomId }, 'cluster: cannot open the room stream');
      });
    }

    /** Opens the room's stream, again until it works (JetStream may not be ready yet). */
    async #start(): Promise<void> {
      for (let attempt = 0; ; attempt++) {
        try {
          if (js === undefined || jsm === undefined) throw new Error('not connected to NATS');
          const bounds = await ensureStream(jsm, this.roomId, bufferWindowMs, replicas);
          this.cursor = bounds.last;
          break;
        } catch (err: unknown) {
          if (this.#released || attempt >= openAttempts) throw err;
          await pause(250 * Math.min(attempt + 1, 8));
        }
      }
      if (this.#released || js === undefined) return;
      this.#stop = followStream(
        js,
        this.roomId,
        this.cursor + 1,
        (f) => this.#take(f),
        (err) => {
          logger.warn({ err: String(err), room: this.roomId }, 'cluster: following the room again');
        },
      );
    }

    recordPosition(): void {
      const cursor = this.cursor;
      if (this.local.size === 0 || cursor <= this.#recorded) return;
      handover
        .record(this.hash, cursor)
        .then(() => {
          if (cursor > this.#recorded) this.#recorded = cursor;
        })
        .catch(() => {});
    }

    get #roster(): RoomRoster {
      return rosterOf(this.hash);
    }

    get size(): number {
      let count = 0;
      for (const stored of this.#roster.devices.values()) {
        if (stored.entry.state === 'present') count++;
      }
      return count;
    }

    get hostKey(): string | undefined {
      return this.#roster.hostKey();
    }

    idOf(device: string): DeviceId | undefined {
      const stored = this.#roster.devices.get(device);
      return stored?.entry.state === 'present' ? stored.entry.id : undefined;
    }

    devices(): DeviceId[] {
      return this.#roster.present().map(([, stored]) => stored.entry.id);
    }

    join(device: DeviceId, replay: Replay): void {
      const key = deviceKey(device);
      const local: LocalDevice = { pending: true, queue: [], upto: 0 };
      this.local.set(key, local);
      this.#join(key, device, local)
        .then(({ frames, gap }) => {
          replay(frames, gap);
          counters.replayed += frames.length;
        })
        .catch((err: unknown) => {
          logger.error({ err: String(err), room: this.roomId, device: key }, 'cluster: join');
          replay([], true);
        })
        .finally(() => {
          local.pending = false;
          for (const f of local.queue) if (f.seq > local.upto) this.listener.deliver(f.frame, key);
          local.queue = [];
        });
    }

    async #join(
      key: string,
      device: DeviceId,
      local: LocalDevice,
    ): Promise<{ frames: string[]; gap: boolean }> {
      await this.ready;
      if (jsm === undefined || js === undefined) throw new Error('not connected to NATS');
      const before = this.#roster.devices.get(key);
      const wasPresent = before?.entry.state === 'present';
      const origin = await this.#origin(key, before?.entry);
      await write(this.hash, key, {
        id: device,
        node,
        state: 'present',
        order: wasPresent ? before.order : 0,
        cursor: 0,
        nodeSeq: 0,
        droppedAt: 0,
      });
      const bounds = await streamBounds(jsm, this.roomId);
      local.upto = bounds.last;
      if (origin === undefined) return { frames: [], gap: false };
      const entry = before?.entry;
      if (entry?.state === 'absent' && now() >= entry.droppedAt + bufferWindowMs) {
        return { frames: [], gap: origin.lost || bounds.last > origin.cursor };
      }
      const aged = bounds.first > origin.cursor + 1 && bounds.last >= bounds.first;
      const from = Math.max(origin.cursor, bounds.first - 1);
      const range = await readRange(js, this.roomId, from, bounds.last);
      const frames: string[] = [];
      for (const f of range) {
        if (f.to !== key && (f.to !== '*' || f.from === key)) continue;
        // a broadcast of its old node reached it there directly
        if (f.node === origin.node && f.to === '*' && f.nodeSeq <= origin.nodeSeq) continue;
        frames.push(f.frame.toString('utf8'));
      }
      return { frames, gap: origin.lost || aged };
    }

    /** Where the replay of a device joining here starts; undefined for nothing to replay. */
    async #origin(key: string, entry: RosterEntry | undefined): Promise<Origin | undefined> {
      if (entry === undefined || entry.state === 'left') return undefined;
      if (entry.state === 'present') {
        return entry.node === node ? undefined : handover.release(entry.node, this.hash, key);
      }
      if (entry.cursor < 0) return handover.lostOn(entry.node, this.hash);
      return { cursor: entry.cursor, node: entry.node, nodeSeq: entry.nodeSeq, lost: false };
    }

    depart(device: string, reason: DepartureReason): void {
      const stored = this.#roster.devices.get(device);
      this.local.delete(device);
      if (stored === undefined || stored.entry.state !== 'present') return;
      const entry: RosterEntry =
        reason === 'disconnect'
          ? {
              ...stored.entry,
              state: 'absent',
              order: stored.order,
              cursor: this.cursor,
              nodeSeq,
              droppedAt: now(),
            }
          : { ...stored.entry, state: 'left', reason, order: stored.order };
      // heard here at once, and by the other nodes through the roster
      applyEntry(this.hash, device, entry, 0);
      write(this.hash, device, entry).catch((err: unknown) => {
        logger.warn({ err: String(err), device }, 'cluster: departure not recorded');
      });
    }

    /** Whether a device elsewhere or kept for can receive; true also for a broadcast's `*`. */
    #reaches(stored: { entry: RosterEntry } | undefined, at: number): boolean {
      if (stored === undefined) return false;
      const { entry } = stored;
      if (entry.state === 'present') return true;
      return entry.state === 'absent' && at < entry.droppedAt + bufferWindowMs;
    }

    sendTo(device: string, frame: Buffer): boolean {
      if (!this.#reaches(this.#roster.devices.get(device), now())) return false;
      this.#publish(device, frame);
      return true;
    }

    broadcast(frame: Buffer): void {
      const at = now();
      for (const [device, stored] of this.#roster.devices) {
        if (this.local.has(device)) continue;
        if (this.#reaches(stored, at)) {
          this.#publish('*', frame);
          return;
        }
      }
    }

    #publish(to: string, frame: Buffer): void {
      const message = { to, from: '', node, nodeSeq: ++nodeSeq, frame };
      const published: Promise<void> = this.ready
        .then(() => {
          if (js === undefined) throw new Error('not connected to NATS');
          return publishFrame(js, this.roomId, { ...message, from: senderOf(frame) });
        })
        .then(() => {
          counters.published++;
        })
        .catch((err: unknown) => {
          counters.publishFailures++;
          logger.warn({ err: String(err), room: this.roomId }, 'cluster: frame not published');
        })
        .finally(() => inFlight.delete(published));
      inFlight.add(published);
    }

    #take(f: StreamFrame): void {
      if (f.seq > this.cursor) this.cursor = f.seq;
      if (f.node === node) return;
      counters.received++;
      if (f.to !== '*') {
        this.#to(f.to, f);
        return;
      }
      for (const device of this.local.keys()) if (device !== f.from) this.#to(device, f);
    }

    #to(device: string, f: StreamFrame): void {
      const local = this.local.get(device);
      if (local === undefined) return;
      if (local.pending) local.queue.push(f);
      else if (f.seq > local.upto) this.listener.deliver(f.frame, device);
    }

    dropAll(): void {
      for (const device of [...this.local.keys()]) this.depart(device, 'disconnect');
    }

    release(): void {
      this.#released = true;
      this.#stop?.();
      lines.delete(this.hash);
    }
  }

  return {
    open(roomId, listener) {
      const hash = roomHash(roomId);
      const line = new ClusterRoomLine(roomId, hash, listener);
      lines.set(hash, line);
      return line;
    },

    revoke(device) {
      for (const [hash, roster] of rosters) {
        const stored = roster.devices.get(device);
        if (stored === undefined || stored.entry.state === 'left') continue;
        const entry: RosterEntry = { ...stored.entry, state: 'left', reason: 'revoked' };
        write(hash, device, entry).catch(() => {});
      }
    },

    sweep: markDeadNodes,

    absentDevices() {
      let count = 0;
      const at = now();
      for (const roster of rosters.values()) {
        for (const { entry } of roster.devices.values()) {
          if (entry.state === 'absent' && at < entry.droppedAt + bufferWindowMs) count++;
        }
      }
      return count;
    },

    settled() {
      if (inFlight.size === 0) return undefined;
      return Promise.allSettled([...inFlight]).then(() => undefined);
    },

    accepting() {
      return link.connected && rosterLoaded;
    },

    describe() {
      // connected: joins are taken (the roster is loaded)
      const nats = link.connected && rosterLoaded ? 'connected' : 'disconnected';
      return {
        health: { cluster: { node, nats, nodes: liveness.count() } },
        metrics: [
          metric(
            'connected',
            'gauge',
            '1 while this node is connected to NATS.',
            link.connected ? 1 : 0,
          ),
          metric('nodes', 'gauge', 'Relay nodes alive in the cluster.', liveness.count()),
          metric(
            'published_total',
            'counter',
            'Frames published to room streams.',
            counters.published,
          ),
          metric(
            'publish_failures_total',
            'counter',
            'Frames NATS did not take.',
            counters.publishFailures,
          ),
          metric('received_total', 'counter', 'Frames from other nodes.', counters.received),
          metric('replayed_total', 'counter', 'Frames replayed on rejoin.', counters.replayed),
        ].join(''),
      };
    },

    async close() {
      closed = true;
      clearInterval(deadNodeCheck);
      clearInterval(positions);
      handover.stop();
      for (const line of [...lines.values()]) line.release();
      await liveness.stop();
      await link.close();
    },
  };
}

/** One Prometheus metric `relay_cluster_<name>` with its help and type lines. */
function metric(name: string, type: 'gauge' | 'counter', help: string, value: number): string {
  const full = `relay_cluster_${name}`;
  return `# HELP ${full} ${help}\n# TYPE ${full} ${type}\n${full} ${value}\n`;
}
