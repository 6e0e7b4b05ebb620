import { setTimeout as pause } from 'node:timers/promises';
import type { NatsConnection } from '@nats-io/transport-node';
import type { NatsAccess } from '../config/nats-access.ts';
import type { Logger } from '../log.ts';
import type { Broker, BrokerReport, RoomLine, RoomListener } from '../relay/broker.ts';
import { type ClusterClock, createClusterClock } from './cluster-clock.ts';
import { type ClusterCounters, describeCluster } from './cluster-metrics.ts';
import { Handover, positionEveryMs } from './handover.ts';
import { droppedOn } from './join-replay.ts';
import type { LineNode, NatsHandles } from './line-parts.ts';
import { type NatsLink, openNatsLink, replicasFor } from './nats-link.ts';
import { type NodeLiveness, watchNodes } from './node-liveness.ts';
import { Publications } from './publications.ts';
import { type RecordSeal, recordSealFor } from './record-seal.ts';
import { ClusterRoomLine } from './room-line.ts';
import { type RosterEntry, roomHash } from './roster.ts';
import { RosterMirror, rosterRetentionMs } from './roster-mirror.ts';

export interface ClusterBrokerOptions {
  /** NATS server URLs (`cluster.nats`). */
  urls: readonly string[];
  /** This node's name (`cluster.node`). */
  node: string;
  /** `buffer.seconds` in ms: the retention of each room's stream. */
  bufferWindowMs: number;
  logger: Logger;
  now?: () => number;
  /** The shared secret (`auth.secret`): the seal of every record (record-seal.ts). */
  secret: string;
  /** Credentials and CA for NATS (`cluster.user`...). */
  access?: NatsAccess;
}

/**
 * The cluster broker (NATS JetStream): the roster of every room is a KV bucket mirrored in every
 * node (join order, host = the longest present, absent devices with the stream position they
 * reached); every routed frame for a device on another node, or absent, goes to the room's own
 * stream (retention `buffer.seconds`), which every node holding the room follows; a device that
 * rejoins on any node gets, from the stream, what it had not received.
 */
export class ClusterBroker implements Broker {
  readonly #node: string;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #bufferWindowMs: number;
  readonly #link: NatsLink;
  /** NATS's clock: what nodes compare (drops, buffer windows), whatever this node's says. */
  readonly #clock: ClusterClock;
  readonly #seal: RecordSeal;
  readonly #lines = new Map<string, ClusterRoomLine>();
  /** Per room, the refused joins' write-backs not written yet (`RoomLineParts.undone`). */
  readonly #undone = new Map<string, Map<string, RosterEntry>>();
  readonly #counters: ClusterCounters = {
    published: 0,
    publishFailures: 0,
    received: 0,
    replayed: 0,
  };
  readonly #publications: Publications;
  readonly #liveness: NodeLiveness;
  readonly #handover: Handover;
  readonly #mirror: RosterMirror;
  /** What every room line of this node shares, read-only. */
  readonly #lineNode: LineNode;
  readonly #nats: NatsHandles;
  readonly #timers: NodeJS.Timeout[];
  #closed = false;
  /**
   * Devices revoked while this node runs; the revocation bucket tells a restarted node the
   * earlier ones again (`revocation-paths.ts`).
   */
  readonly #revoked = new Map<string, number>();

  constructor(options: ClusterBrokerOptions) {
    const { node, logger, bufferWindowMs } = options;
    const localNow = options.now ?? Date.now;
    const clock = createClusterClock(localNow, logger);
    const now = clock.now;
    const seal = recordSealFor(options.secret, logger);
    this.#clock = clock;
    this.#seal = seal;
    this.#node = node;
    this.#logger = logger;
    this.#now = now;
    this.#bufferWindowMs = bufferWindowMs;
    const replicas = replicasFor(options.urls);
    const link = openNatsLink(options.urls, `sync-host relay ${node}`, logger, options.access);
    this.#link = link;
    this.#publications = new Publications(this.#counters, logger, localNow);
    this.#liveness = watchNodes(link, node, logger, localNow, replicas, seal, clock);
    this.#handover = new Handover(node, replicas, rosterRetentionMs, logger, seal);
    const mirror = new RosterMirror({
      node,
      logger,
      now,
      replicas,
      link,
      liveness: this.#liveness,
      seal,
      changed: (hash, device, entry, change) => {
        this.#lines.get(hash)?.rosterChanged(device, entry, change);
      },
    });
    this.#mirror = mirror;
    this.#lineNode = {
      name: node,
      nameBytes: Buffer.from(node, 'utf8'),
      logger,
      now,
      bufferWindowMs,
      replicas,
      seal,
    };
    this.#nats = {
      connection: () => link.connection,
      js: () => mirror.js,
      jsm: () => mirror.jsm,
    };
    link.onConnected((nc) => {
      mirror.follow(nc).catch((err: unknown) => {
        logger.error({ err: String(err) }, 'cluster: cannot follow the roster');
      });
      void this.#openPositions(nc);
    });
    // The position of each room with devices here is recorded, so a kill -9 of this node loses
    // nothing; nodes that stopped beating have their devices marked absent.
    const positions = setInterval(() => this.#recordPositions(), positionEveryMs);
    const deadNodeCheck = setInterval(() => mirror.markDeadNodes(), 1_000);
    this.#timers = [positions.unref(), deadNodeCheck.unref()];
  }

  /** The positions bucket and the release answers, again until JetStream answers. */
  async #openPositions(nc: NatsConnection): Promise<void> {
    for (let attempt = 1; !this.#closed && !nc.isClosed(); attempt++) {
      try {
        await this.#handover.connected(nc, (hash, device) => this.#release(hash, device));
        return;
      } catch (err: unknown) {
        this.#logger.warn(
          { err: String(err), attempt },
          'cluster: positions bucket not ready, again',
        );
        await pause(500 * Math.min(attempt, 4));
      }
    }
  }

  /**
   * Another node takes a device of this node over: its connection here is closed (4009) and
   * the answer says up to where the room's stream and this node's own publications reached it
   * (for a device whose connection dropped here, where they had reached at the drop).
   */
  #release(hash: string, device: string): { cursor: number; nodeSeq: number } | null {
    const line = this.#lines.get(hash);
    if (line !== undefined) return line.handOver(device, this.#publications.count) ?? null;
    // the room is no longer held here (its last device dropped): this node's copy of the
    // roster still says where a device that dropped here had reached
    const entry =
      this.#undone.get(hash)?.get(device) ??
      this.#mirror.rosters.get(hash)?.devices.get(device)?.entry;
    return droppedOn(this.#node, entry) ?? null;
  }

  #recordPositions(): void {
    if (!this.#link.connected) return;
    for (const line of this.#lines.values()) line.recordPosition();
  }

  open(roomId: string, listener: RoomListener): RoomLine {
    const hash = roomHash(roomId);
    const mirror = this.#mirror;
    const parts = {
      node: this.#lineNode,
      nats: this.#nats,
      roster: {
        roster: mirror.rosterOf(hash),
        apply: (device: string, entry: RosterEntry) => mirror.applyHere(hash, device, entry),
        write: (device: string, entry: RosterEntry) => mirror.write(hash, device, entry),
        read: (device: string) => mirror.read(hash, device),
      },
      publications: this.#publications,
      counters: this.#counters,
      handover: this.#handover,
      undone: this.#undoneOf(hash),
      released: () => {
        this.#lines.delete(hash);
        if (this.#undone.get(hash)?.size === 0) this.#undone.delete(hash);
      },
    };
    const line = new ClusterRoomLine(parts, roomId, hash, listener);
    this.#lines.set(hash, line);
    return line;
  }

  #undoneOf(hash: string): Map<string, RosterEntry> {
    let undone = this.#undone.get(hash);
    if (undone === undefined) {
      undone = new Map();
      this.#undone.set(hash, undone);
    }
    return undone;
  }

  revoke(device: string, revokedAt: number): void {
    this.#revoked.set(device, revokedAt);
    for (const [hash, roster] of this.#mirror.rosters) {
      const stored = roster.devices.get(device);
      if (stored === undefined || stored.entry.state === 'left') continue;
      const entry: RosterEntry = { ...stored.entry, state: 'left', reason: 'revoked' };
      this.#mirror.write(hash, device, entry).catch(() => {});
    }
  }

  sweep(): void {
    this.#mirror.markDeadNodes();
  }

  absentDevices(): number {
    let count = 0;
    const at = this.#now();
    for (const roster of this.#mirror.rosters.values()) {
      for (const { entry } of roster.devices.values()) {
        if (entry.state === 'absent' && at < entry.droppedAt + this.#bufferWindowMs) count++;
      }
    }
    return count;
  }

  revokedAt(device: string): number | undefined {
    return this.#revoked.get(device);
  }

  settled(): Promise<void> | undefined {
    return this.#publications.settled();
  }

  stored(room: string, device: string): Promise<boolean> | undefined {
    return this.#publications.stored(room, device);
  }

  healthy(): boolean {
    return true;
  }

  accepting(): boolean {
    return this.#link.connected && this.#mirror.loaded;
  }

  describe(): BrokerReport {
    const cluster = describeCluster({
      node: this.#node,
      connected: this.#link.connected,
      accepting: this.accepting(),
      nodes: this.#liveness.count(),
      counters: this.#counters,
      rejected: this.#seal.rejected,
      clockOffsetMs: this.#clock.offsetMs,
    });
    // nothing is kept on this node: the rooms' streams keep it in NATS
    return { stored: 0, pending: 0, bytes: 0, fileBytes: 0, ...cluster };
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#mirror.close();
    for (const timer of this.#timers) clearInterval(timer);
    this.#handover.stop();
    this.#publications.stop();
    for (const line of [...this.#lines.values()]) line.release();
    await this.#liveness.stop();
    await this.#link.close();
  }
}

/** The cluster broker of `options` (see `ClusterBroker`). */
export function createClusterBroker(options: ClusterBrokerOptions): Broker {
  return new ClusterBroker(options);
}
