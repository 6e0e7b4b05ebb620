import { jetstream } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { ClusterClock } from './cluster-clock.ts';
import type { NatsLink } from './nats-link.ts';
import { watchBucket } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';

/** The KV bucket of node heartbeats: key = node name (hex), value = its clock. */
export const nodesBucket = 'sync-host-nodes';
/** A node writes its heartbeat this often. */
export const beatMs = 2_000;
/** A node not heard of for this long is dead: its devices become absent and a new host is chosen. */
export const deadAfterMs = 9_000;

/** Which relay nodes are alive, from their heartbeats in NATS. */
export interface NodeLiveness {
  alive(node: string): boolean;
  /** Nodes alive, this one included. */
  count(): number;
  stop(): Promise<void>;
}

/** Beats for `self` and watches the other nodes' beats. */
export function watchNodes(
  link: NatsLink,
  self: string,
  logger: Logger,
  now: () => number,
  replicas: number,
  seal: RecordSeal,
  clock: ClusterClock,
): NodeLiveness {
  const lastSeen = new Map<string, number>();
  let watchingSince: number | undefined;
  let bucket: KV | undefined;
  const key = Buffer.from(self, 'utf8').toString('hex');
  // each beat also measures this node's offset from NATS's clock
  const beatValue = () => seal.seal('beat', key, String(now()));

  const beat = setInterval(() => {
    if (bucket !== undefined && link.connected) {
      clock.beat(bucket, key, beatValue).catch(() => {});
    }
  }, beatMs);
  beat.unref();

  let stopped = false;
  let stopWatch: (() => void) | undefined;
  /**
   * Opens the bucket (again a second after a failure: a NATS cluster electing leaders) and
   * watches it; while the watch is made again, every node counts as alive for a while again.
   */
  function follow(nc: NatsConnection): void {
    void (async () => {
      const kv = await new Kvm(nc).create(nodesBucket, {
        history: 1,
        ttl: 10 * deadAfterMs,
        // on a NATS cluster the heartbeats must outlive the loss of a server, like the roster
        replicas,
      });
      bucket = kv;
      await clock.beat(kv, key, beatValue);
      if (stopWatch !== undefined || stopped) return;
      watchingSince = now();
      // made again by itself after any loss, from the next beat on
      stopWatch = watchBucket(
        jetstream(nc),
        nodesBucket,
        'last-per-subject',
        (change) => {
          if (change.operation !== 'PUT') return;
          // a beat without the seal (another NATS client) keeps no node alive
          if (!seal.verify('beat', change.key, change.value)) return;
          lastSeen.set(Buffer.from(change.key, 'hex').toString('utf8'), now());
        },
        (err) => {
          watchingSince = now();
          logger.warn({ err: String(err) }, 'cluster: following node heartbeats again');
        },
      );
    })().catch((err: unknown) => {
      logger.warn({ err: String(err) }, 'cluster: cannot open the node heartbeats');
      if (!stopped && !nc.isClosed()) setTimeout(() => follow(nc), 1_000).unref();
    });
  }
  link.onConnected(follow);

  function alive(node: string): boolean {
    if (node === self) return true;
    const at = now();
    // Just started: nobody has had the time to beat yet.
    if (watchingSince === undefined || at - watchingSince < deadAfterMs) return true;
    const seen = lastSeen.get(node);
    return seen !== undefined && at - seen < deadAfterMs;
  }

  return {
    alive,
    count() {
      let count = 1;
      const at = now();
      for (const [node, seen] of lastSeen) if (node !== self && at - seen < deadAfterMs) count++;
      return count;
    },
    async stop() {
      stopped = true;
      stopWatch?.();
      clearInterval(beat);
      if (bucket !== undefined && link.connected) await bucket.delete(key).catch(() => {});
    },
  };
}
