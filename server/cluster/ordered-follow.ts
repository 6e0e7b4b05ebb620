import { setTimeout as pause } from 'node:timers/promises';
import {
  type Consumer,
  type ConsumerMessages,
  DeliverPolicy,
  type JetStreamClient,
  type JsMsg,
} from '@nats-io/jetstream';

/**
 * While a pull waits with nothing to deliver, the server sends an idle heartbeat this often.
 * (The library's defaults, 15 s for pulls and 30 s for its KV watches, make a lost consumer
 * show only after a minute or more.)
 */
export const idleHeartbeatMs = 2_000;
/**
 * A consumer that delivered nothing, not even a heartbeat, for this long is taken as lost and
 * made again. A follower's consumer is an R1 consumer on one server of a NATS cluster; when
 * that server dies the consumer goes with it and nothing tells the client: its info request
 * gets no answer, so the library would wait for it without end.
 */
export const silentAfterMs = 3 * idleHeartbeatMs;
/**
 * A consumer not made within this long is asked for again (the first asks still count), up to
 * {@link maxAsks} times: nats-server before 2.9.12 places an R1 consumer on any server of its
 * stream, a dead one too, so while one server of three is down a third of new consumers go there
 * and their creation is never answered.
 */
export const askAgainMs = 1_000;
const maxAsks = 5;
/** Each pull waits at most this long on the server (then the next one is made). */
const expiresMs = 10_000;
/** Waits between two attempts to make the consumer, growing with each failure in a row. */
const refollowMs = 500;
const maxRefollowMs = 5_000;

/** What one follower reads of a stream, and where it starts. */
export interface FollowOptions {
  stream: string;
  /** Only the messages of this subject filter (a KV bucket's `$KV.<name>.>`); all when absent. */
  subject?: string;
  /** The first stream sequence, or the last message of each subject first (a KV watch). */
  from: number | 'last-per-subject';
  onMessage(m: JsMsg): void;
  /** Its consumer ended, fell silent or could not be made: it is made again, after `next`. */
  onRestart(err: unknown): void;
}

/**
 * Notices a consumer that stopped delivering: `heard` on each message, and its heartbeats count
 * too; `silent` is called once after {@link silentAfterMs} of nothing.
 */
function watchSilence(
  messages: ConsumerMessages,
  silent: () => void,
): { heard(): void; stop(): void } {
  let last = Date.now();
  const heard = () => {
    last = Date.now();
  };
  void (async () => {
    for await (const status of messages.status()) {
      // heartbeats, expired pulls and discards come from the consumer's server: it is alive
      if (status.type === 'heartbeat' || status.type === 'debug' || status.type === 'discard')
        heard();
    }
  })();
  const check = setInterval(() => {
    if (Date.now() - last <= silentAfterMs) return;
    clearInterval(check);
    silent();
  }, idleHeartbeatMs / 2);
  check.unref();
  return { heard, stop: () => clearInterval(check) };
}

/**
 * An ordered consumer from `next` (undefined: the last message of each subject first): the first
 * of up to {@link maxAsks} creations, one more each {@link askAgainMs} while none answered; those
 * answered later are deleted. Fails when every creation asked for failed.
 */
function makeConsumer(
  js: JetStreamClient,
  options: FollowOptions,
  next: number | undefined,
): Promise<Consumer> {
  const config = {
    ...(options.subject === undefined ? {} : { filter_subjects: options.subject }),
    ...(next === undefined
      ? { deliver_policy: DeliverPolicy.LastPerSubject }
      : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: next }),
  };
  return new Promise((resolve, reject) => {
    let made = false;
    let asked = 0;
    let failed = 0;
    const ask = (): void => {
      asked++;
      if (asked >= maxAsks) clearInterval(again);
      js.consumers.get(options.stream, { ...config }).then(
        (consumer) => {
          if (made) {
            consumer.delete().catch(() => {});
            return;
          }
          made = true;
          clearInterval(again);
          resolve(consumer);
        },
        (err: unknown) => {
          if (made || ++failed < asked) return;
          // every ask so far failed: no use waiting for the next one
          made = true;
          clearInterval(again);
          reject(err);
        },
      );
    };
    const again = setInterval(ask, askAgainMs);
    again.unref();
    ask();
  });
}

/**
 * Follows a stream in order, each message once, with an ordered consumer that is made again
 * from the next sequence whenever it ends, fails or falls silent (a NATS server lost, a
 * reconnect, JetStream not ready yet). Returns its stop.
 */
export function followOrdered(js: JetStreamClient, options: FollowOptions): () => void {
  let next = options.from === 'last-per-subject' ? undefined : Math.max(1, options.from);
  let stopped = false;
  let current: ConsumerMessages | undefined;
  let failures = 0;

  /**
   * Takes one message (in order: the library hands them over as it parses them, without an
   * iterator's promise per message on the cluster's per-message path).
   */
  function take(m: JsMsg, heard: () => void): void {
    if (stopped) return;
    heard();
    failures = 0;
    if (next !== undefined && m.seq < next) return;
    next = m.seq + 1;
    options.onMessage(m);
  }

  /** Waits until the consumer ends or falls silent (then throws), or the stop. */
  async function read(messages: ConsumerMessages, silent: () => boolean): Promise<void> {
    // a throw of onMessage stops the consumer with it: made again from the next message
    const ended = await messages.closed();
    if (stopped) return;
    if (ended instanceof Error) throw ended;
    throw new Error(
      silent() ? `consumer silent for ${silentAfterMs} ms` : 'consumer ended by the library',
    );
  }

  void (async () => {
    while (!stopped) {
      let consumer: Consumer | undefined;
      let silence: { heard(): void; stop(): void } | undefined;
      try {
        consumer = await makeConsumer(js, options, next);
        const heard = () => silence?.heard();
        current = await consumer.consume({
          expires: expiresMs,
          idle_heartbeat: idleHeartbeatMs,
          callback: (m) => take(m, heard),
        });
        let silent = false;
        const messages = current;
        silence = watchSilence(messages, () => {
          silent = true;
          void messages.close();
        });
        if (!stopped) await read(messages, () => silent);
      } catch (err: unknown) {
        if (!stopped) options.onRestart(err);
      } finally {
        silence?.stop();
      }
      void current?.close();
      // the consumer is left on its server otherwise (until its inactivity threshold)
      consumer?.delete().catch(() => {});
      failures++;
      if (!stopped) await pause(Math.min(refollowMs * failures, maxRefollowMs));
    }
  })();
  return () => {
    stopped = true;
    void current?.close();
  };
}

/** One change of a KV bucket as a follower reads it. */
export interface BucketChange {
  key: string;
  operation: 'PUT' | 'DEL' | 'PURGE';
  revision: number;
  value: Uint8Array;
  /** Messages of the bucket after this one, when it was delivered (0: caught up). */
  pending: number;
}

/**
 * Watches a KV bucket like `kv.watch()` (the last value of each key, then every change, in
 * order), or from revision `from`, through {@link followOrdered}: a watch whose consumer was
 * on a lost NATS server is made again within seconds. Returns its stop.
 */
export function watchBucket(
  js: JetStreamClient,
  bucket: string,
  from: number | 'last-per-subject',
  onChange: (change: BucketChange) => void,
  onRestart: (err: unknown) => void,
): () => void {
  const prefix = `$KV.${bucket}.`;
  return followOrdered(js, {
    stream: `KV_${bucket}`,
    subject: `${prefix}>`,
    from,
    onMessage(m) {
      const operation = m.headers?.get('KV-Operation');
      onChange({
        key: m.subject.slice(prefix.length),
        operation: operation === 'DEL' || operation === 'PURGE' ? operation : 'PUT',
        revision: m.seq,
        value: m.data,
        pending: m.info.pending,
      });
    },
    onRestart,
  });
}
