import type { Clock } from './clock.ts';

/** A `{to, payload}` frame with its sequence number, kept until the relay confirmed it. */
export interface Outgoing {
  readonly seq: number;
  /** The frame's text, or its UTF-8 bytes for a socket that takes them as text (`textBytes`). */
  readonly text: string | Uint8Array;
  /** A store frame: meaningful on this socket only, so never sent again after a drop. */
  readonly volatile?: boolean;
  /** `text` is a frame in the binary form (a `chunk-put`), sent as a binary frame. */
  readonly binary?: boolean;
}

/** What the keep-alive needs from the connection it watches. */
export interface KeepAliveOptions {
  /** Time and timers of the quiet check and the pong watchdog. */
  clock: Clock;
  /** A `ping` goes out after this much time without one. */
  keepAliveMs: number;
  /** No `pong` within this after a `ping`: the connection is dead. */
  pongTimeoutMs: number;
  /** Writes `{"type":"ping"}` if the rate allows; false when it has to wait for a later try. */
  sendPing: () => boolean;
  /** Called once when a `pong` is overdue; the connection gives up its socket. */
  onDead: () => void;
}

/** While frames go at the rate, the least time between two pings (`confirmingPingInMs`). */
const confirmingPingGapMs = 100;

interface FlushWaiter {
  seq: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The pong-confirmed bookkeeping of one connection. The relay answers frames in order, so the
 * `pong` to a `ping` confirms every message written before that ping: each ping marks the last
 * sequence number written, its pong confirms up to the mark. A ping also goes out after
 * `keepAliveMs` without one, and a pong missing `pongTimeoutMs` after its ping means the
 * connection is dead (a cut without a TCP close).
 */
export class KeepAlive {
  private readonly options: KeepAliveOptions;
  /** Written to the socket, not yet confirmed, in order. */
  private unconfirmed: Outgoing[] = [];
  /** Outstanding pings: the last seq written before each, and when it went out. */
  private marks: Array<{ seq: number; at: number }> = [];
  private confirmed = 0;
  private waiters: FlushWaiter[] = [];
  private lastPingAt = 0;
  private cancelQuietCheck: (() => void) | undefined;
  private cancelPongWatchdog: (() => void) | undefined;

  /** Idle until `start()`. */
  constructor(options: KeepAliveOptions) {
    this.options = options;
  }

  /** The highest sequence number the relay has confirmed. */
  get confirmedSeq(): number {
    return this.confirmed;
  }

  /** Messages written but not yet confirmed. */
  get inFlight(): number {
    return this.unconfirmed.length;
  }

  /** Messages were written and no outstanding ping asks about them. */
  get needsPing(): boolean {
    return this.unconfirmed.length > 0 && this.marks.length === 0;
  }

  /** The connection joined: watches for quiet from now on. */
  start(): void {
    this.lastPingAt = this.options.clock.now();
    this.armQuietCheck();
  }

  /** A message went out on the socket. */
  written(message: Outgoing): void {
    this.unconfirmed.push(message);
  }

  /**
   * Ms until a ping confirming what was written may go (0: now). While frames go at the rate
   * (`atRate`: the connection's bucket below half its burst), at most one ping per
   * `confirmingPingGapMs`: a ping costs a token like any frame, and one after every write took
   * a third of the rate of a large file's chunk frames.
   */
  confirmingPingInMs(atRate: boolean): number {
    if (!atRate) return 0;
    return Math.max(0, this.lastPingAt + confirmingPingGapMs - this.options.clock.now());
  }

  /** Asks the relay to confirm what was written so far (no-op while the rate says wait). */
  ping(): void {
    if (!this.options.sendPing()) return;
    const now = this.options.clock.now();
    this.lastPingAt = now;
    this.marks.push({ seq: this.unconfirmed.at(-1)?.seq ?? this.confirmed, at: now });
    if (this.cancelPongWatchdog === undefined) this.armPongWatchdog();
  }

  /** A `pong` arrived: confirms up to the oldest outstanding ping and settles `flush` waiters. */
  pong(): void {
    const mark = this.marks.shift();
    this.cancelPongWatchdog?.();
    this.cancelPongWatchdog = undefined;
    if (mark === undefined) return;
    this.armPongWatchdog();
    while (this.unconfirmed.length > 0 && this.unconfirmed[0]!.seq <= mark.seq) {
      this.unconfirmed.shift();
    }
    this.confirmed = Math.max(this.confirmed, mark.seq);
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) {
      if (waiter.seq <= this.confirmed) waiter.resolve();
      else this.waiters.push(waiter);
    }
  }

  /** Resolves once everything up to `seq` is confirmed; rejected by `rejectWaiters`. */
  whenConfirmed(seq: number): Promise<void> {
    if (this.confirmed >= seq) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ seq, resolve, reject });
    });
  }

  /**
   * The socket is gone: stops the timers and forgets outstanding pings. Returns the messages
   * the relay did not confirm, oldest first, to be sent again after the rejoin.
   */
  dropped(): Outgoing[] {
    this.cancelQuietCheck?.();
    this.cancelPongWatchdog?.();
    this.cancelQuietCheck = undefined;
    this.cancelPongWatchdog = undefined;
    this.marks = [];
    const resend = this.unconfirmed;
    this.unconfirmed = [];
    return resend;
  }

  /** The connection ended for good: every pending `whenConfirmed` rejects with `error`. */
  rejectWaiters(error: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }

  /**
   * Pings once `keepAliveMs` passed without a ping. While one is outstanding (its pong or the
   * watchdog decides) or the rate says wait, it looks again after half that time.
   */
  private armQuietCheck(): void {
    const { clock, keepAliveMs } = this.options;
    const quietMs = clock.now() - this.lastPingAt;
    const dueMs = quietMs >= keepAliveMs ? keepAliveMs / 2 : keepAliveMs - quietMs;
    this.cancelQuietCheck = clock.after(dueMs, () => {
      if (clock.now() - this.lastPingAt >= keepAliveMs && this.marks.length === 0) this.ping();
      if (this.cancelQuietCheck !== undefined) this.armQuietCheck();
    });
  }

  private armPongWatchdog(): void {
    const oldest = this.marks[0];
    if (oldest === undefined) return;
    const { clock, pongTimeoutMs } = this.options;
    this.cancelPongWatchdog = clock.after(
      Math.max(0, oldest.at + pongTimeoutMs - clock.now()),
      () => {
        this.cancelPongWatchdog = undefined;
        this.options.onDead();
      },
    );
  }
}
