import {
  createInbox,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { ClusterCounters } from './cluster-metrics.ts';

/** A publication that NATS has not answered within this is counted as failed (JetStream's own default). */
export const publishTimeoutMs = 5_000;

/** One publication not answered yet: when it was sent (undefined while it waits for its stream). */
interface Open {
  room: string;
  /** The sender's device key, when known: a failure is held against its connection. */
  sender: string | undefined;
  sentAt: number | undefined;
}

/** A sender's failure is kept this long for its next `ping` (then its connection is long gone). */
const failureKeptMs = 10 * 60_000;

/** A publication to hand to NATS at the end of this turn of the event loop. */
interface Outgoing {
  nc: NatsConnection;
  n: number;
  subject: string;
  payload: Uint8Array;
  headers: MsgHdrs | undefined;
}

/**
 * This node's publications of routed frames to the rooms' streams, numbered in the order the node
 * made them (the `nodeSeq` of the stream's frames). Each is sent at once with a reply subject in
 * this node's one inbox, instead of as a request of its own (a promise, a timer and two error
 * objects with their stack traces per frame, on the relay's hot path); NATS's acknowledgement
 * into the stream, its refusal, or no answer within `publishTimeoutMs` closes it. `settled()`
 * resolves once every publication made before the call is closed: the relay answers a ping only
 * then, so a pong confirms that what was sent before is in the stream. The publications of one
 * turn of the event loop (frames read from many sockets) go to NATS together, in one write.
 */
export class Publications {
  /** The number of the last publication made (this node's publication counter). */
  count = 0;
  /** Publications not closed yet, in the order they were made (a Map keeps insertion order). */
  readonly #open = new Map<number, Open>();
  /** `settled()` calls waiting for every publication up to `upto` to close. */
  #waiters: Array<{ upto: number; resolve: () => void }> = [];
  #connection: NatsConnection | undefined;
  #inbox = '';
  #subscription: Subscription | undefined;
  #outgoing: Outgoing[] = [];
  /** Senders (room and device key) with a publication that failed, and when it last did. */
  readonly #failed = new Map<string, number>();
  readonly #sweep: NodeJS.Timeout;

  constructor(
    private readonly counters: ClusterCounters,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.#sweep = setInterval(() => this.#expire(), 1_000);
    this.#sweep.unref();
  }

  /**
   * Numbers a new publication of a frame for `room` from device `sender`; `send` or `fail`
   * closes it later.
   */
  begin(room: string, sender?: string): number {
    const n = ++this.count;
    this.#open.set(n, { room, sender, sentAt: undefined });
    return n;
  }

  /** Publishes number `n` (from `begin`) to `subject`; NATS's answer closes it. */
  send(
    nc: NatsConnection,
    n: number,
    subject: string,
    payload: Uint8Array,
    headers: MsgHdrs | undefined,
  ): void {
    const open = this.#open.get(n);
    if (open === undefined) return;
    open.sentAt = this.now();
    if (this.#outgoing.length === 0) setImmediate(() => this.#flush());
    this.#outgoing.push({ nc, n, subject, payload, headers });
  }

  #flush(): void {
    const outgoing = this.#outgoing;
    this.#outgoing = [];
    for (const { nc, n, subject, payload, headers } of outgoing) {
      if (this.#connection !== nc) this.#listen(nc);
      try {
        nc.publish(subject, payload, {
          reply: `${this.#inbox}.${n}`,
          ...(headers ? { headers } : {}),
        });
      } catch (err: unknown) {
        this.fail(n, err);
      }
    }
  }

  /** Publication `n` could not be made (no stream, no connection). */
  fail(n: number, err: unknown): void {
    const open = this.#open.get(n);
    if (open === undefined) return;
    this.counters.publishFailures++;
    this.logger.warn({ err: String(err), room: open.room }, 'cluster: frame not published');
    // before the waiters hear of it: the sender's next pong must not confirm it
    if (open.sender !== undefined) this.#failed.set(senderKey(open.room, open.sender), this.now());
    this.#close(n);
  }

  /**
   * For a `ping` of `sender` in `room`: resolves, once every publication made so far is closed,
   * whether all of the sender's were stored since its previous ping (the mark of a failure is
   * taken by the answer); undefined when nothing is open and nothing failed.
   */
  stored(room: string, sender: string): Promise<boolean> | undefined {
    const key = senderKey(room, sender);
    const take = (): boolean => !this.#failed.delete(key);
    const settled = this.settled();
    if (settled !== undefined) return settled.then(take);
    return this.#failed.has(key) ? Promise.resolve(take()) : undefined;
  }

  /** Resolves once every publication made so far is closed; undefined when none is open. */
  settled(): Promise<void> | undefined {
    if (this.#open.size === 0) return undefined;
    return new Promise((resolve) => this.#waiters.push({ upto: this.count, resolve }));
  }

  /** Stops the timeout sweep and the inbox. */
  stop(): void {
    clearInterval(this.#sweep);
    this.#subscription?.unsubscribe();
  }

  /** One inbox per connection for every answer (NATS keeps it across reconnects). */
  #listen(nc: NatsConnection): void {
    this.#subscription?.unsubscribe();
    this.#connection = nc;
    this.#inbox = createInbox();
    this.#subscription = nc.subscribe(`${this.#inbox}.*`, {
      callback: (err, msg) => {
        if (err !== null) {
          this.logger.warn({ err: String(err) }, 'cluster: publication answers failed');
          return;
        }
        const n = Number(msg.subject.slice(this.#inbox.length + 1));
        const refusal = refusalOf(msg.headers, msg.data);
        if (refusal === undefined) {
          if (this.#open.has(n)) this.counters.published++;
          this.#close(n);
        } else this.fail(n, refusal);
      },
    });
  }

  #close(n: number): void {
    if (!this.#open.delete(n)) return;
    if (this.#waiters.length === 0) return;
    // the oldest publication still open; every waiter below it is settled
    const oldest = this.#open.keys().next();
    const below = oldest.done === true ? Number.POSITIVE_INFINITY : oldest.value;
    let settled = 0;
    while (settled < this.#waiters.length && (this.#waiters[settled]?.upto ?? 0) < below) {
      settled++;
    }
    if (settled === 0) return;
    const done = this.#waiters.slice(0, settled);
    this.#waiters = this.#waiters.slice(settled);
    for (const waiter of done) waiter.resolve();
  }

  /** Sent publications without an answer after `publishTimeoutMs` failed. */
  #expire(): void {
    const forgotten = this.now() - failureKeptMs;
    for (const [key, at] of this.#failed) if (at < forgotten) this.#failed.delete(key);
    const before = this.now() - publishTimeoutMs;
    for (const [n, open] of this.#open) {
      if (open.sentAt !== undefined && open.sentAt <= before) {
        this.fail(n, new Error(`no answer from NATS within ${publishTimeoutMs} ms`));
      }
    }
  }
}

const senderKey = (room: string, sender: string): string => `${room}\n${sender}`;

const decoder = new TextDecoder();

/** Why NATS refused a publication (a status such as 503, no stream; or a JetStream error). */
function refusalOf(headers: MsgHdrs | undefined, data: Uint8Array): string | undefined {
  if (headers?.hasError) return `NATS ${headers.code} ${headers.description}`;
  // an acknowledgement is {"stream":…,"seq":…}; a refusal {"error":{…}}
  const text = decoder.decode(data);
  if (text.startsWith('{"stream"')) return undefined;
  try {
    const answer = JSON.parse(text) as { error?: { description?: string }; stream?: string };
    if (answer.error === undefined && typeof answer.stream === 'string') return undefined;
    return answer.error?.description ?? `unexpected answer ${text.slice(0, 200)}`;
  } catch {
    return `unreadable answer ${text.slice(0, 200)}`;
  }
}
