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
  return new NodeHeartbeats({ link, self, logger, now, replicas, seal, clock });
}

interface HeartbeatOptions {
  link: NatsLink;
  self: string;
  logger: Logger;
  now: () => number;
  replicas: number;
  seal: RecordSeal;
  clock: ClusterClock;
}

/** This node's heartbeat in the nodes bucket, and the other nodes' as last seen here. */
class NodeHeartbeats implements NodeLiveness {
  readonly #options: HeartbeatOptions;
  readonly #lastSeen = new Map<string, number>();
  #watchingSince: number | undefined;
  #bucket: KV | undefined;
  /** This node's key in the bucket: its name in hex. */
  readonly #key: string;
  readonly #beat: NodeJS.Timeout;
  #stopped = false;
  #stopWatch: (() => void) | undefined;

  constructor(options: HeartbeatOptions) {
    this.#options = options;
    const { link, clock } = options;
    this.#key = Buffer.from(options.self, 'utf8').toString('hex');
    this.#beat = setInterval(() => {
      if (this.#bucket !== undefined && link.connected) {
        clock.beat(this.#bucket, this.#key, this.#beatValue).catch(() => {});
      }
    }, beatMs);
    this.#beat.unref();
    link.onConnected((nc) => this.#follow(nc));
  }

  // each beat also measures this node's offset from NATS's clock
  readonly #beatValue = () =>
    this.#options.seal.seal('beat', this.#key, String(this.#options.now()));

  /**
   * Opens the bucket (again a second after a failure: a NATS cluster electing leaders) and
   * watches it; while the watch is made again, every node counts as alive for a while again.
   */
  #follow(nc: NatsConnection): void {
    this.#open(nc).catch((err: unknown) => {
      this.#options.logger.warn({ err: String(err) }, 'cluster: cannot open the node heartbeats');
      if (!this.#stopped && !nc.isClosed()) setTimeout(() => this.#follow(nc), 1_000).unref();
    });
  }

  async #open(nc: NatsConnection): Promise<void> {
    const { now, logger, seal, clock, replicas } = this.#options;
    const kv = await new Kvm(nc).create(nodesBucket, {
      history: 1,
      ttl: 10 * deadAfterMs,
      // on a NATS cluster the heartbeats must outlive the loss of a server, like the roster
      replicas,
    });
    this.#bucket = kv;
    await clock.beat(kv, this.#key, this.#beatValue);
    if (this.#stopWatch !== undefined || this.#stopped) return;
    this.#watchingSince = now();
    // made again by itself after any loss, from the next beat on
    this.#stopWatch = watchBucket(
      jetstream(nc),
      nodesBucket,
      'last-per-subject',
      (change) => {
        if (change.operation !== 'PUT') return;
        // a beat without the seal (another NATS client) keeps no node alive
        if (!seal.verify('beat', change.key, change.value)) return;
        this.#lastSeen.set(Buffer.from(change.key, 'hex').toString('utf8'), now());
      },
      (err) => {
        this.#watchingSince = now();
        logger.warn({ err: String(err) }, 'cluster: following node heartbeats again');
      },
    );
  }

  alive(node: string): boolean {
    if (node === this.#options.self) return true;
    const at = this.#options.now();
    // Just started: nobody has had the time to beat yet.
    const since = this.#watchingSince;
    if (since === undefined || at - since < deadAfterMs) return true;
    const seen = this.#lastSeen.get(node);
    return seen !== undefined && at - seen < deadAfterMs;
  }

  count(): number {
    let count = 1;
    const at = this.#options.now();
    for (const [node, seen] of this.#lastSeen) {
      if (node !== this.#options.self && at - seen < deadAfterMs) count++;
    }
    return count;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stopWatch?.();
    clearInterval(this.#beat);
    const bucket = this.#bucket;
    if (bucket !== undefined && this.#options.link.connected) {
      await bucket.delete(this.#key).catch(() => {});
    }
  }
}
