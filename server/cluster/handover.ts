import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { randomHex } from '../hashing.ts';
import type { Logger } from '../log.ts';
import type { RecordSeal } from './record-seal.ts';

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
    private readonly seal: RecordSeal,
  ) {}

  /** On each (re)connect: the positions bucket, and the answer to release requests. */
  async connected(nc: NatsConnection, release: Release): Promise<void> {
    if (this.#nc !== nc) this.#answer(nc, release);
    this.#positions = await new Kvm(nc).create(positionsBucket, {
      history: 1,
      ttl: this.ttlMs,
      replicas: this.replicas,
      // Reads go to the stream's leader: a direct get may be answered by any replica, one
      // still catching up after a restart included, and a takeover read from it could start
      // a replay after messages it never had.
      allow_direct: false,
    });
  }

  /** Answers release requests from now on (before the bucket: a node that answers is alive). */
  #answer(nc: NatsConnection, release: Release): void {
    this.#nc = nc;
    const subject = releaseSubject(this.node);
    this.#subscription = nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err !== null) return;
        try {
          // a request without the seal (another NATS client) closes nothing and gets no answer
          const text = this.seal.openText('release', subject, msg.data);
          if (text === undefined) return;
          const { hash, device, nonce } = JSON.parse(text) as {
            hash: string;
            device: string;
            nonce: string;
          };
          const answer = JSON.stringify(release(hash, device));
          msg.respond(this.seal.seal('release', nonce, answer));
        } catch (e: unknown) {
          this.logger.warn({ err: String(e) }, 'cluster: unreadable release request');
        }
      },
    });
  }

  /** Records this node's position in a room's stream. */
  async record(hash: string, cursor: number): Promise<void> {
    if (this.#positions === undefined) throw new Error('not connected to NATS');
    const key = `${hash}.${hex(this.node)}`;
    await this.#positions.put(key, this.seal.seal('position', key, String(cursor)));
  }

  /**
   * Asks `from` to close the device's connection there and say how far it had handed frames
   * over (or, for a device dropped there, had at the drop). Undefined when that node is alive
   * and neither holds the device nor dropped it (nothing to replay).
   * A node that does not answer (killed, or cut off from NATS) is taken as dead.
   */
  async release(from: string, hash: string, device: string): Promise<Origin | undefined> {
    if (this.#nc === undefined) throw new Error('not connected to NATS');
    try {
      const subject = releaseSubject(from);
      const nonce = randomHex(16);
      const request = this.seal.seal('release', subject, JSON.stringify({ hash, device, nonce }));
      const reply = await this.#nc.request(subject, request, { timeout: releaseTimeoutMs });
      const text = this.seal.openText('release', nonce, reply.data);
      if (text === undefined) throw new Error('release answer without the seal');
      const held = JSON.parse(text) as { cursor: number; nodeSeq: number } | null;
      return held === null ? undefined : { ...held, node: from, lost: false };
    } catch {
      return this.lostOn(from, hash);
    }
  }

  /** The origin of a device whose node died: that node's last recorded position in the room. */
  async lostOn(from: string, hash: string): Promise<Origin> {
    if (this.#positions === undefined) throw new Error('not connected to NATS');
    const key = `${hash}.${hex(from)}`;
    const entry = await this.#positions.get(key);
    const text =
      entry === null || entry.operation !== 'PUT'
        ? undefined
        : this.seal.openText('position', key, entry.value);
    // none recorded (or not by a node): the whole stream is replayed, with `gap`
    const cursor = text === undefined ? 0 : Number(text);
    return { cursor, node: from, nodeSeq: Number.MAX_SAFE_INTEGER, lost: true };
  }

  stop(): void {
    this.#subscription?.unsubscribe();
  }
}
