import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';

/**
 * Where a device's replay starts when it joins on this node while the roster still has it present
 * on another node, or absent after its node died: the stream sequence up to which its old node
 * had handed frames over, and that node's own publications it delivered directly.
 */
export interface Origin {
  /** Frames of the room's stream with a higher sequence were not handed to the device. */
  cursor: number;
  /** The node it was on. */
  node: string;
  /** Frames that node published with a counter up to this one it delivered directly. */
  nodeSeq: number;
  /**
   * Its node died: `cursor` is the last position that node recorded (at most a second old), so
   * frames just before the kill may come again, and what that node routed only between its own
   * devices is gone (`gap`).
   */
  lost: boolean;
}

/** The KV bucket of each node's position in each room's stream: key `<room hash>.<node hex>`. */
export const positionsBucket = 'sync-host-positions';
/** A node records its rooms' positions this often. */
export const positionEveryMs = 1_000;
/** How long a join waits for the old node to release the device before taking it as dead. */
const releaseTimeoutMs = 2_000;

const hex = (node: string): string => Buffer.from(node, 'utf8').toString('hex');
const releaseSubject = (node: string): string => `sync-host.release.${hex(node)}`;

/** What this node answers when another node takes one of its devices over. */
export type Release = (hash: string, device: string) => { cursor: number; nodeSeq: number } | null;

/** Positions of this node's rooms in NATS, and the release of devices between nodes. */
export class Handover {
  #positions: KV | undefined;
  #nc: NatsConnection | undefined;
  #subscription: Subscription | undefined;

  constructor(
    private readonly node: string,
    private readonly replicas: number,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {}

  /** On each (re)connect: the positions bucket, and the answer to release requests. */
  async connected(nc: NatsConnection, release: Release): Promise<void> {
    if (this.#nc !== nc) this.#answer(nc, release);
    this.#positions = await new Kvm(nc).create(positionsBucket, {
      history: 1,
      ttl: this.ttlMs,
      replicas: this.replicas,
    });
  }

  /** Answers release requests from now on (before the bucket: a node that answers is alive). */
  #answer(nc: NatsConnection, release: Release): void {
    this.#nc = nc;
    this.#subscription = nc.subscribe(releaseSubject(this.node), {
      callback: (err, msg) => {
        if (err !== null) return;
        try {
          const { hash, device } = msg.json<{ hash: string; device: string }>();
          msg.respond(JSON.stringify(release(hash, device)));
        } catch (e: unknown) {
          this.logger.warn({ err: String(e) }, 'cluster: unreadable release request');
        }
      },
    });
  }

  /** Records this node's position in a room's stream. */
  async record(hash: string, cursor: number): Promise<void> {
    if (this.#positions === undefined) throw new Error('not connected to NATS');
    await this.#positions.put(`${hash}.${hex(this.node)}`, String(cursor));
  }

  /**
   * Asks `from` to close the device's connection there and say how far it had handed frames
   * over. Undefined when that node is alive but does not hold the device (nothing to replay).
   * A node that does not answer (killed, or cut off from NATS) is taken as dead.
   */
  async release(from: string, hash: string, device: string): Promise<Origin | undefined> {
    if (this.#nc === undefined) throw new Error('not connected to NATS');
    try {
      const reply = await this.#nc.request(releaseSubject(from), JSON.stringify({ hash, device }), {
        timeout: releaseTimeoutMs,
      });
      const held = reply.json<{ cursor: number; nodeSeq: number } | null>();
      return held === null ? undefined : { ...held, node: from, lost: false };
    } catch {
      return this.lostOn(from, hash);
    }
  }

  /** The origin of a device whose node died: that node's last recorded position in the room. */
  async lostOn(from: string, hash: string): Promise<Origin> {
    if (this.#positions === undefined) throw new Error('not connected to NATS');
    const entry = await this.#positions.get(`${hash}.${hex(from)}`);
    const cursor = entry === null || entry.operation !== 'PUT' ? 0 : Number(entry.string());
    return { cursor, node: from, nodeSeq: Number.MAX_SAFE_INTEGER, lost: true };
  }

  stop(): void {
    this.#subscription?.unsubscribe();
  }
}
