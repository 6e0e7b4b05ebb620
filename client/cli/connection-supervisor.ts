import { type Backoff, createBackoff } from '../backoff.ts';
import { Emitter } from '../emitter.ts';
import type { SyncError, SyncErrorCode } from '../errors.ts';
import type { ConnectionState, RelayConnection, RelayEvents, Target } from '../relay-connection.ts';
import { printable } from './printable.ts';

/** Final closes that end supervision: another connection would be refused the same way. */
const endsForGood: ReadonlySet<SyncErrorCode> = new Set<SyncErrorCode>([
  'auth_failed',
  'revoked',
  'invalid_url',
]);

/** Delays before a fresh connection after a final close. */
export interface ReconnectDelays {
  /** The first delay, in ms. Default 5_000. */
  firstMs: number;
  /** The longest delay, in ms. Default 60_000. */
  maxMs: number;
}

export const defaultReconnectDelays: ReconnectDelays = { firstMs: 5_000, maxMs: 60_000 };

export interface SupervisorOptions {
  /**
   * A fresh connection to the room (not connected): called once at first, then after each
   * final close.
   */
  open: () => RelayConnection;
  /** One line for the user (stderr) each time a connection ended and another is due. */
  onLine: (line: string) => void;
  /** Default `defaultReconnectDelays`. */
  delays?: ReconnectDelays;
  /** Source of randomness for the jitter; default Math.random. */
  random?: () => number;
}

/**
 * The events of a supervisor. `connection` comes for each fresh connection before it connects
 * (bind a provider to it there); the relay events are those of whichever connection is current,
 * so a listener stays subscribed across connections.
 */
export interface SupervisorEvents {
  connection: (connection: RelayConnection) => void;
  joined: RelayEvents['joined'];
  message: RelayEvents['message'];
  presence: RelayEvents['presence'];
  host: RelayEvents['host'];
  error: RelayEvents['error'];
  state: (state: SupervisorState) => void;
}

/** The current connection's state; `waiting` between a final close and the next connection. */
export type SupervisorState = ConnectionState | 'waiting' | 'stopped';

/**
 * Keeps one device in one relay room for as long as a command runs. A `RelayConnection` already
 * reconnects after network losses; the supervisor handles its final closes: after `replaced`
 * (another process of this device joined), `unsupported_data`, `message_too_big` or any close
 * other than `auth_failed`/`revoked`, it waits (5 s, doubling up to 60 s, back to 5 s after a
 * connection that stayed a minute) and opens a fresh connection, saying so in one line.
 * `auth_failed` and `revoked` end it: `ended` resolves with that error.
 */
export class ConnectionSupervisor extends Emitter<SupervisorEvents> {
  /** Resolves with the error that ended supervision for good, or undefined after `stop()`. */
  readonly ended: Promise<SyncError | undefined>;
  private current: RelayConnection;
  private currentState: SupervisorState = 'idle';
  private readonly backoff: Backoff;
  private readonly resetAfterMs: number;
  private resolveEnded: (error: SyncError | undefined) => void = () => undefined;
  private started = false;
  private stopping = false;
  private retry: ReturnType<typeof setTimeout> | undefined;
  private joinedAt: number | undefined;
  private opened = 0;

  constructor(private readonly options: SupervisorOptions) {
    super();
    const delays = options.delays ?? defaultReconnectDelays;
    this.backoff = createBackoff({
      initialDelayMs: delays.firstMs,
      maxDelayMs: delays.maxMs,
      jitter: 0.2,
      random: options.random,
    });
    this.resetAfterMs = Math.max(delays.maxMs, 1);
    this.ended = new Promise((resolveEnded) => {
      this.resolveEnded = resolveEnded;
    });
    this.current = this.adopt(options.open());
  }

  /** The current connection (the last one while `waiting`). */
  get connection(): RelayConnection {
    return this.current;
  }

  get state(): SupervisorState {
    return this.currentState;
  }

  /** Device ids present in the room as of the last event (none while not joined). */
  get devices(): string[] {
    return this.current.state === 'joined' ? this.current.devices : [];
  }

  /** Fresh connections opened after final closes. */
  get reconnects(): number {
    return Math.max(0, this.opened - 1);
  }

  /** Connects the first connection; `connection` listeners added before see it already bound. */
  start(): void {
    if (this.started || this.stopping) return;
    this.started = true;
    this.connect(this.current);
  }

  /**
   * Sends `payload` to `to` on the current connection and resolves once the relay confirmed
   * it; rejects with the relay's error for it (`unknown_target`...) or when the connection ends
   * first. While `waiting`, the message goes on the next connection.
   */
  async send(to: Target, payload: Record<string, unknown>): Promise<void> {
    const connection = this.currentState === 'waiting' ? await this.next() : this.current;
    const refused: SyncError[] = [];
    const stop = connection.on('error', (error) => refused.push(error));
    try {
      connection.send(to, payload);
      await connection.flush();
    } finally {
      stop();
    }
    const error = refused[0];
    if (error !== undefined) throw error;
  }

  /**
   * Stops: no further connection; the current one closes without `leave` (the relay buffers),
   * cut after `cutAfterMs` when the relay does not answer the close (2 s by default).
   */
  async stop(options: { cutAfterMs?: number } = {}): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearTimeout(this.retry);
    if (this.current.state !== 'closed') await this.current.close({ leave: false, ...options });
    this.setState('stopped');
    this.resolveEnded(undefined);
  }

  private next(): Promise<RelayConnection> {
    return new Promise((resolveNext) => {
      const stop = this.on('connection', (connection) => {
        stop();
        resolveNext(connection);
      });
    });
  }

  /** Forwards the connection's events while it is current; emits `connection`. */
  private adopt(connection: RelayConnection): RelayConnection {
    this.opened++;
    const current = () => this.current === connection;
    const stops = [
      connection.on('joined', (frame) => {
        this.joinedAt = performance.now();
        if (current()) this.emit('joined', frame);
      }),
      connection.on('message', (message) => current() && this.emit('message', message)),
      connection.on('presence', (frame) => current() && this.emit('presence', frame)),
      connection.on('host', (frame) => current() && this.emit('host', frame)),
      connection.on('error', (error) => current() && this.emit('error', error)),
      connection.on('state', (state) => {
        if (current() && state !== 'closed') this.setState(state);
      }),
      connection.on('close', (info) => {
        for (const stop of stops) stop();
        if (current()) this.closed(info.error);
      }),
    ];
    this.current = connection;
    this.emit('connection', connection);
    return connection;
  }

  private connect(connection: RelayConnection): void {
    connection.connect().catch(() => {
      // The close event says why, and decides what comes next.
    });
  }

  private closed(error: SyncError | undefined): void {
    if (this.stopping) return;
    if (error !== undefined && endsForGood.has(error.code)) {
      this.stopping = true;
      this.setState('stopped');
      this.resolveEnded(error);
      return;
    }
    const stayed = this.joinedAt === undefined ? 0 : performance.now() - this.joinedAt;
    if (stayed >= this.resetAfterMs) this.backoff.reset();
    this.joinedAt = undefined;
    const delayMs = this.backoff.next();
    const why =
      error === undefined
        ? 'the connection was closed'
        : `${printable(error.message)} (${printable(error.code)})`;
    this.options.onLine(`connection ended: ${why}; joining again in ${seconds(delayMs)}`);
    this.setState('waiting');
    this.retry = setTimeout(() => {
      if (this.stopping) return;
      this.connect(this.adopt(this.options.open()));
    }, delayMs);
  }

  private setState(state: SupervisorState): void {
    if (this.currentState === state) return;
    this.currentState = state;
    this.emit('state', state);
  }
}

function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * Supervises the connections `open` makes (see `ConnectionSupervisor`): call `start()` once the
 * `connection` listeners (a provider...) are bound.
 */
export function superviseConnection(options: SupervisorOptions): ConnectionSupervisor {
  return new ConnectionSupervisor(options);
}
