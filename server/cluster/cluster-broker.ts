import { setTimeout as pause } from 'node:timers/promises';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { Broker } from '../relay/broker.ts';
import { type ClusterCounters, describeCluster } from './cluster-metrics.ts';
import { Handover, positionEveryMs } from './handover.ts';
import type { RoomLineContext } from './line-context.ts';
import { openNatsLink, replicasFor } from './nats-link.ts';
import { watchNodes } from './node-liveness.ts';
import { Publications } from './publications.ts';
import { ClusterRoomLine } from './room-line.ts';
import { type RosterEntry, roomHash } from './roster.ts';
import { createRosterMirror, rosterRetentionMs } from './roster-mirror.ts';

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
  const replicas = replicasFor(options.urls);
  const link = openNatsLink(options.urls, `sync-host relay ${node}`, logger);
  const lines = new Map<string, ClusterRoomLine>();
  const counters: ClusterCounters = { published: 0, publishFailures: 0, received: 0, replayed: 0 };
  const publications = new Publications(counters, logger, now);
  const liveness = watchNodes(link, node, logger, now, replicas);
  const handover = new Handover(node, replicas, rosterRetentionMs, logger);
  const mirror = createRosterMirror({
    node,
    logger,
    now,
    replicas,
    link,
    liveness,
    heldRoom: (hash) => lines.get(hash),
  });
  let closed = false;
  /**
   * Devices revoked while this node runs; the revocation bucket tells a restarted node the
   * earlier ones again (`revocation-paths.ts`).
   */
  const revoked = new Map<string, number>();

  const context: RoomLineContext = {
    node,
    nodeBytes: Buffer.from(node, 'utf8'),
    logger,
    now,
    bufferWindowMs,
    replicas,
    connection: () => link.connection,
    js: () => mirror.js,
    jsm: () => mirror.jsm,
    handover,
    rosterOf: mirror.rosterOf,
    applyEntry: mirror.applyEntry,
    write: mirror.write,
    counters,
    publications,
    released: (hash) => lines.delete(hash),
  };

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

  link.onConnected((nc) => {
    mirror.follow(nc).catch((err: unknown) => {
      logger.error({ err: String(err) }, 'cluster: cannot follow the roster');
    });
    void openPositions(nc);
  });

  /**
   * Another node takes a device of this node over: its connection here is closed (4009) and
   * the answer says up to where the room's stream and this node's own publications reached it.
   */
  function release(hash: string, device: string): { cursor: number; nodeSeq: number } | null {
    const cursor = lines.get(hash)?.handOver(device);
    return cursor === undefined ? null : { cursor, nodeSeq: publications.count };
  }

  /** Records the position of each room with devices here, so a kill -9 of this node loses nothing. */
  const positions = setInterval(() => {
    if (!link.connected) return;
    for (const line of lines.values()) line.recordPosition();
  }, positionEveryMs);
  positions.unref();

  const deadNodeCheck = setInterval(mirror.markDeadNodes, 1_000);
  deadNodeCheck.unref();

  return {
    open(roomId, listener) {
      const hash = roomHash(roomId);
      const line = new ClusterRoomLine(context, roomId, hash, listener);
      lines.set(hash, line);
      return line;
    },

    revoke(device, revokedAt) {
      revoked.set(device, revokedAt);
      for (const [hash, roster] of mirror.rosters) {
        const stored = roster.devices.get(device);
        if (stored === undefined || stored.entry.state === 'left') continue;
        const entry: RosterEntry = { ...stored.entry, state: 'left', reason: 'revoked' };
        mirror.write(hash, device, entry).catch(() => {});
      }
    },

    sweep: mirror.markDeadNodes,

    absentDevices() {
      let count = 0;
      const at = now();
      for (const roster of mirror.rosters.values()) {
        for (const { entry } of roster.devices.values()) {
          if (entry.state === 'absent' && at < entry.droppedAt + bufferWindowMs) count++;
        }
      }
      return count;
    },

    revoked: () => revoked,

    settled: () => publications.settled(),

    healthy: () => true,

    accepting() {
      return link.connected && mirror.loaded;
    },

    describe() {
      const cluster = describeCluster({
        node,
        connected: link.connected,
        accepting: link.connected && mirror.loaded,
        nodes: liveness.count(),
        counters,
      });
      // nothing is kept on this node: the rooms' streams keep it in NATS
      return { stored: 0, pending: 0, bytes: 0, fileBytes: 0, ...cluster };
    },

    async close() {
      closed = true;
      mirror.close();
      clearInterval(deadNodeCheck);
      clearInterval(positions);
      handover.stop();
      publications.stop();
      for (const line of [...lines.values()]) line.release();
      await liveness.stop();
      await link.close();
    },
  };
}
