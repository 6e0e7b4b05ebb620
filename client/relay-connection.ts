import { isRelayErrorCode } from '../protocol/relay-codes.ts';
import type { AppendFrame, CatchupFrame, JoinFrame } from '../protocol/relay-frames.ts';
import { NamedTimers } from './clock.ts';
import {
  type RelayConnectionOptions,
  type ResolvedConnectionOptions,
  resolveConnectionOptions,
  type WebSocketLike,
} from './connection-options.ts';
import { DedupeEnvelope } from './dedupe-envelope.ts';
import { Emitter } from './emitter.ts';
import { RelayError, SyncError } from './errors.ts';
import { KeepAlive, type Outgoing } from './keep-alive.ts';
import type { ConnectionState, RelayEvents, Target } from './relay-events.ts';
import { type JoinedFrame, parseRelayFrame, type RoutedMessage } from './relay-frames.ts';
import { refusalOf } from './relay-refusals.ts';
import { TokenBucket } from './token-bucket.ts';

export type {
  RelayConnectionOptions,
  WebSocketConstructor,
  WebSocketLike,
} from './connection-options.ts';
export { envelopeKey } from './dedupe-envelope.ts';
export type { CloseInfo, ConnectionState, RelayEvents, Target } from './relay-events.ts';

const pingFrame = '{"type":"ping"}';
const leaveFrame = '{"type":"leave"}';
/** After `close()`, the relay has this long to answer the close handshake before the cut. */
const closeHandshakeMs = 2_000;
const encoder = new TextEncoder();

/** The connection's own timers; the keep-alive owns the ping and pong ones. */
type TimerName = 'join' | 'pump' | 'reconnect';

/**
 * One device in one relay room. Joins on `connect()`, reconnects with backoff and jitter under
 * the same device id (so the relay hands over what it buffered), queues what is sent meanwhile
 * and sends it in order after the rejoin. A message counts as delivered to the relay once a
 * `pong` for a later `ping` came back; messages not confirmed when a connection drops are sent
 * again after the rejoin, and receivers drop the copies they already have (see `dedupe`).
 *
 * This class is the state machine (idle → connecting → joined ⇄ reconnecting → closed); the
 * pacing (`TokenBucket`), the pong-confirmed bookkeeping (`KeepAlive`) and the exactly-once
 * envelope (`DedupeEnvelope`) are modules of their own.
 */
export class RelayConnection extends Emitter<RelayEvents> {
  readonly room: string;
  readonly device: string | number;
  private readonly options: ResolvedConnectionOptions;
  private readonly bucket: TokenBucket;
  private readonly keepAlive: KeepAlive;
  private readonly envelope = new DedupeEnvelope();
  private socket: WebSocketLike | undefined;
  private currentState: ConnectionState = 'idle';
  /** Waiting to be written: queued while not joined, or held back by the rate. */
  private pending: Outgoing[] = [];
  private lastSeq = 0;
  private readonly timers: NamedTimers<TimerName>;
  private firstJoin: { resolve: (f: JoinedFrame) => void; reject: (e: Error) => void }[] = [];
  private roomHost: string | undefined;
  private roomDevices = new Set<string>();
  private role: 'host' | 'member' | undefined;
  private closing: Promise<void> | undefined;
  /** The last error frame before a close: its message explains an `auth_failed` close. */
  private lastRefusal: string | undefined;

  /** Applies the defaults and checks the options (throws `invalid_options`, `no_websocket`). */
  constructor(options: RelayConnectionOptions) {
    super();
    this.options = resolveConnectionOptions(options);
    const { clock, ratePerSecond, rateBurst, keepAliveMs, pongTimeoutMs } = this.options;
    this.room = this.options.room;
    this.device = this.options.device;
    this.bucket = new TokenBucket(ratePerSecond, rateBurst, () => clock.now());
    this.timers = new NamedTimers(clock);
    this.keepAlive = new KeepAlive({
      clock,
      keepAliveMs,
      pongTimeoutMs,
      sendPing: () => this.sendPing(),
      onDead: () => {
        if (this.socket !== undefined) this.abort(this.socket, 'no pong');
      },
    });
  }

  /** idle → connecting → joined ⇄ reconnecting → closed. */
  get state(): ConnectionState {
    return this.currentState;
  }

  /** The room's host device id as of the last event, when joined. */
  get host(): string | undefined {
    return this.roomHost;
  }

  /** Whether this device is the room's host. */
  get isHost(): boolean {
    return this.role !== undefined && this.roomHost === String(this.device);
  }

  /** Device ids present in the room (this one included) as of the last event. */
  get devices(): string[] {
    return [...this.roomDevices];
  }

  /** Messages not yet confirmed by the relay (queued or in flight). */
  get queued(): number {
    return this.pending.length + this.keepAlive.inFlight;
  }

  /**
   * Opens the connection and joins; resolves with the first `joined`. Keeps reconnecting until
   * `close()`; rejects when the relay refuses the join for good (`auth_failed`...).
   */
  connect(): Promise<JoinedFrame> {
    if (this.currentState === 'closed') {
      return Promise.reject(new RelayError('closed', 'the connection is closed'));
    }
    const joined = new Promise<JoinedFrame>((resolve, reject) => {
      this.firstJoin.push({ resolve, reject });
    });
    if (this.currentState === 'idle') this.open();
    return joined;
  }

  /** Sends to the room's host. */
  sendToHost(payload: Record<string, unknown>): void {
    this.send('host', payload);
  }

  /** Sends to every other device in the room (and buffers for those briefly away). */
  broadcast(payload: Record<string, unknown>): void {
    this.send('broadcast', payload);
  }

  /** Sends to one device of the room. */
  sendToDevice(device: string | number, payload: Record<string, unknown>): void {
    this.send(device, payload);
  }

  /**
   * Sends `payload` (a JSON object) to `to`. While not joined the message waits in a bounded
   * queue and is sent, in order, after the (re)join. Throws `queue_full` when the queue is full,
   * `message_too_big` above `maxMessageBytes`, `closed` after `close()`.
   *
   * `once: false` leaves this message without the exactly-once envelope (about 40 bytes less),
   * for messages that are harmless twice, such as Yjs updates: sent again after a drop, such a
   * message may arrive twice; the order is kept either way.
   */
  send(to: Target, payload: Record<string, unknown>, options: { once?: boolean } = {}): void {
    if (this.currentState === 'closed' || this.closing !== undefined) {
      throw new RelayError('closed', 'the connection is closed');
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new SyncError('invalid_message', 'payload must be a JSON object');
    }
    const { dedupe, maxQueuedMessages } = this.options;
    const seq = this.lastSeq + 1;
    const text = JSON.stringify({
      to,
      payload: dedupe && options.once !== false ? this.envelope.seal(payload, seq) : payload,
    });
    this.checkSize(text);
    if (this.queued >= maxQueuedMessages) {
      throw new SyncError(
        'queue_full',
        `${maxQueuedMessages} messages are waiting for the relay; try again after the connection is back`,
      );
    }
    this.lastSeq = seq;
    this.pending.push({ seq, text });
    this.pump();
  }

  /**
   * Sends a frame of the document store (`append`, `catchup`: docs/store.md) on the current
   * socket. It answers on that socket only, so a frame not confirmed when the socket
   * drops is not sent again (the provider asks again after the rejoin). Throws `not_joined`
   * while not joined, `message_too_big` above `maxMessageBytes`, `closed` after `close()`.
   */
  sendStoreFrame(frame: AppendFrame | CatchupFrame): void {
    if (this.currentState === 'closed' || this.closing !== undefined) {
      throw new RelayError('closed', 'the connection is closed');
    }
    if (this.currentState !== 'joined') {
      throw new SyncError('not_joined', 'store frames go on a joined connection only');
    }
    const text = JSON.stringify(frame);
    this.checkSize(text);
    this.lastSeq += 1;
    this.pending.push({ seq: this.lastSeq, text, volatile: true });
    this.pump();
  }

  /**
   * Resolves once the relay has handled every message sent so far (a `pong` came back after
   * them). Rejects when the connection closes first.
   */
  flush(): Promise<void> {
    const seq = this.lastSeq;
    if (this.keepAlive.confirmedSeq >= seq) return Promise.resolve();
    if (this.currentState === 'closed') {
      return Promise.reject(new RelayError('closed', 'the connection is closed'));
    }
    return this.keepAlive.whenConfirmed(seq);
  }

  /**
   * Ends the connection: sends `leave` (the relay forgets this device at once) unless
   * `leave: false`, in which case the relay keeps buffering for it for 60 s, so that the next
   * connection with this device id receives what was missed. Messages not yet sent are dropped
   * (await `flush()` first to keep them).
   */
  close(options: { leave?: boolean } = {}): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    const socket = this.socket;
    this.timers.clear('reconnect');
    let done: () => void = () => undefined;
    this.closing = new Promise<void>((resolve) => {
      done = resolve;
    });
    if (socket === undefined) {
      this.finish(1000);
      done();
      return this.closing;
    }
    const cancelCut = this.options.clock.after(closeHandshakeMs, () =>
      this.abort(socket, 'close timeout'),
    );
    const stop = this.on('close', () => {
      cancelCut();
      stop();
      done();
    });
    if ((options.leave ?? true) && this.currentState === 'joined') socket.send(leaveFrame);
    socket.close(1000, 'client closed');
    return this.closing;
  }

  /** Throws `message_too_big` for a frame above `maxMessageBytes`. */
  private checkSize(text: string): void {
    const { maxMessageBytes } = this.options;
    if (encoder.encode(text).length > maxMessageBytes) {
      throw new SyncError('message_too_big', `the message is larger than ${maxMessageBytes} bytes`);
    }
  }

  private setState(state: ConnectionState): void {
    if (this.currentState === state) return;
    this.currentState = state;
    this.emit('state', state);
  }

  private open(): void {
    this.setState('connecting');
    const { url, room, device, token } = this.options;
    let socket: WebSocketLike;
    try {
      socket = new this.options.WebSocket(url);
    } catch (err: unknown) {
      // A malformed URL: no retry can fix it.
      const error = new RelayError(
        'invalid_url',
        `cannot open ${url}: ${err instanceof Error ? err.message : String(err)}`,
      );
      this.emit('error', error);
      this.finish(1006, error);
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      socket.send(JSON.stringify({ type: 'join', room, device, token } satisfies JoinFrame));
    };
    socket.onmessage = (event) => {
      if (this.socket !== socket) return;
      this.handleFrame(socket, typeof event.data === 'string' ? event.data : String(event.data));
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socketClosed(event.code, event.reason);
    };
    socket.onerror = () => {
      // A close event follows and decides what happens.
    };
    this.timers.set('join', this.options.joinTimeoutMs, () => this.abort(socket, 'join timeout'));
  }

  private handleFrame(socket: WebSocketLike, text: string): void {
    const frame = parseRelayFrame(text);
    if (frame === undefined) {
      this.emit(
        'error',
        new RelayError('invalid_frame', 'the relay sent a frame of unknown shape'),
      );
      return;
    }
    switch (frame.type) {
      case 'joined':
        this.joined(frame);
        return;
      case 'message':
        this.received(frame);
        return;
      case 'store':
        this.emit('store', frame.frame);
        return;
      case 'presence':
        if (frame.state === 'joined') this.roomDevices.add(frame.device);
        else this.roomDevices.delete(frame.device);
        this.emit('presence', frame);
        return;
      case 'host':
        this.roomHost = frame.device;
        this.role = frame.device === String(this.device) ? 'host' : 'member';
        this.emit('host', frame);
        return;
      case 'pong':
        this.keepAlive.pong();
        this.pump();
        return;
      case 'error': {
        const code = isRelayErrorCode(frame.code) ? frame.code : 'relay_error';
        const error = new RelayError(code, frame.message);
        if (this.currentState !== 'joined' && frame.code !== 'auth_failed') {
          // e.g. room_full: this attempt failed, a later one may not.
          this.emit('error', error);
          this.abort(socket, frame.code);
          return;
        }
        if (frame.code === 'auth_failed') this.lastRefusal = frame.message;
        else this.emit('error', error);
        return;
      }
    }
  }

  /** Emits a routed message, once: a copy sent again after a drop is recognised and skipped. */
  private received(frame: RoutedMessage): void {
    const payload = this.envelope.open(frame.from, frame.payload);
    if (payload === undefined) return;
    this.emit('message', { from: frame.from, to: frame.to, room: frame.room, payload });
  }

  private joined(frame: JoinedFrame): void {
    this.timers.clear('join');
    this.options.backoff.reset();
    this.roomHost = frame.host;
    this.role = frame.role;
    this.roomDevices = new Set(frame.devices);
    this.setState('joined');
    this.emit('joined', frame);
    for (const waiter of this.firstJoin.splice(0)) waiter.resolve(frame);
    this.keepAlive.start();
    this.pump();
  }

  /** Writes queued messages while the rate allows, then a ping to confirm them. */
  private pump(): void {
    const socket = this.socket;
    if (this.currentState !== 'joined' || socket === undefined) return;
    this.timers.clear('pump');
    while (this.pending.length > 0 && this.bucket.take()) {
      const next = this.pending.shift()!;
      socket.send(next.text);
      this.keepAlive.written(next);
    }
    if (this.keepAlive.needsPing) this.keepAlive.ping();
    if (this.pending.length > 0 || this.keepAlive.needsPing) {
      this.timers.set('pump', this.bucket.waitMs(), () => this.pump());
    }
  }

  /** The keep-alive's way to the socket: a ping costs a token like any frame. */
  private sendPing(): boolean {
    const socket = this.socket;
    if (socket === undefined || this.currentState !== 'joined') return false;
    if (!this.bucket.take()) return false; // pump() or the keep-alive retries
    socket.send(pingFrame);
    return true;
  }

  /** Gives up on a socket at once (dead, join timeout, refused attempt) as if it had closed. */
  private abort(socket: WebSocketLike, reason: string): void {
    if (this.socket !== socket) return;
    if (socket.terminate !== undefined) socket.terminate();
    else socket.close(4000, reason.slice(0, 120));
    this.socketClosed(1006, reason);
  }

  private socketClosed(code: number, reason: string): void {
    this.socket = undefined;
    this.timers.clear('join');
    this.timers.clear('pump');
    // Whatever the relay did not confirm is sent again after the rejoin, before newer messages.
    this.pending = [...this.keepAlive.dropped(), ...this.pending].filter((out) => !out.volatile);
    this.role = undefined;
    if (this.closing !== undefined) {
      this.finish(code);
      return;
    }
    const refusal = refusalOf(code, reason, this.lastRefusal);
    if (refusal !== undefined) {
      this.emit('error', refusal);
      this.finish(code, refusal);
      return;
    }
    this.setState('reconnecting');
    this.timers.set('reconnect', this.options.backoff.next(), () => {
      if (this.closing === undefined && this.currentState === 'reconnecting') this.open();
    });
  }

  private finish(code: number, error?: RelayError): void {
    this.timers.clearAll();
    this.setState('closed');
    const closedError = error ?? new RelayError('closed', 'the connection was closed');
    for (const waiter of this.firstJoin.splice(0)) waiter.reject(closedError);
    this.keepAlive.rejectWaiters(closedError);
    this.emit('close', error === undefined ? { code } : { code, error });
  }
}

/** Creates a connection (not yet connected: call `connect()`). */
export function createRelayConnection(options: RelayConnectionOptions): RelayConnection {
  return new RelayConnection(options);
}
