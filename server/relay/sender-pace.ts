import type { Connection } from './connection.ts';
import type { RelayMetrics } from './metrics.ts';

/**
 * Paces a sender to the receivers of its room on this relay, so that a burst (a folder's first
 * scan: tens of MiB in one update) reaches a busy receiver at the pace it reads instead of
 * passing its `relay.maxQueuedBytes` and closing it (1013), after which everything goes through
 * the buffer and a catch-up again.
 *
 * The lever is the `pong`: a client sends a bounded window of bytes and then waits for the
 * `pong` that confirms them before sending more (the client library does: 1 MiB). While
 * another device of the sender's room connected here has a quarter of `relay.maxQueuedBytes`
 * or more unsent, the sender's `pong` waits until each such receiver is under that mark, is
 * gone, or `holdMs` passed. So a receiver gets at most the mark plus one window per sender
 * before its senders wait, under its bound. The hold ends after `holdMs` (5 s, under the
 * client's 10 s pong timeout) whatever the receivers do: a receiver that stopped reading slows
 * its room for that long each time, and then is closed by its bound as before. Pongs of one
 * connection leave in the order of their pings.
 *
 * A client that does not wait for its pongs is not slowed; its receivers are bounded as always.
 * In cluster mode only the receivers on the sender's node are seen.
 */
export class SenderPace {
  readonly #markBytes: number;
  readonly #holdMs: number;
  readonly #metrics: RelayMetrics;
  /** The last held pong of each connection that has one on its way. */
  readonly #held = new WeakMap<Connection, Promise<void>>();

  constructor(maxQueuedBytes: number, holdMs: number, metrics: RelayMetrics) {
    this.#markBytes = Math.max(1, Math.floor(maxQueuedBytes / 4));
    this.#holdMs = holdMs;
    this.#metrics = metrics;
  }

  /** Runs `send` (the connection's pong) now, or once its room's receivers here caught up. */
  pong(conn: Connection, send: () => void): void {
    const earlier = this.#held.get(conn);
    const behind = this.#behind(conn);
    if (earlier === undefined && behind === undefined) {
      send();
      return;
    }
    const next = Promise.all([earlier, behind]).then(send);
    this.#held.set(conn, next);
    void next.then(() => {
      if (this.#held.get(conn) === next) this.#held.delete(conn);
    });
  }

  /** Settles once the receivers behind now are under the mark or `holdMs` passed; or undefined. */
  #behind(conn: Connection): Promise<void> | undefined {
    const past = conn.room?.receiversPast(conn, this.#markBytes);
    if (past === undefined || past.length === 0) return undefined;
    this.#metrics.pacedPongs++;
    const under = past.map((receiver) => receiver.queue.whenUnder(this.#markBytes));
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.#holdMs);
      void Promise.all(under).then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
