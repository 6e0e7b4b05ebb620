import type { NodeBytes } from '../protocol/base64.ts';
import { isRelayErrorCode } from '../protocol/relay-codes.ts';
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
import { KeepAlive } from './keep-alive.ts';
import { Outbox, writeTo } from './outbox.ts';
import type { ConnectionState, RelayEvents, Target } from './relay-events.ts';
import {
  type JoinedFrame,
  parseBinaryChunk,
  parseRelayFrame,
  type RoutedMessage,
} from './relay-frames.ts';
import { refusalOf } from './relay-refusals.ts';
import { openRelaySocket } from './relay-socket.ts';
import type { HostRequest, WithoutData } from './store-frames.ts';
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
  private readonly outbox: Outbox;
  private socket: WebSocketLike | undefined;
  private currentState: ConnectionState = 'idle';
  private readonly timers: NamedTimers<TimerName>;
  private firstJoin: { resolve: (f: JoinedFrame) => void; reject: (e: Error) => void }[] = [];
  private roomHost: string | undefined;
  /** This device's role in the project (`owner`, `editor`, `viewer`) as of the last `joined`. */
  private ownRole = 'owner';
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
    this.outbox = new Outbox(this.options, this.envelope);
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

  /**
   * Whether this device only reads in its room: its user is a viewer of the shared project (as
   * the last `joined` said). The host refuses a viewer's appends and the others ignore its
   * document updates; a client sends neither then.
   */
  get readOnly(): boolean {
    return this.ownRole === 'viewer';
  }

  /** Device ids present in the room (this one included) as of the last event. */
  get devices(): string[] {
    return [...this.roomDevices];
  }

  /** The largest frame this connection sends, in UTF-8 bytes (`maxMessageBytes`). */
  get maxMessageBytes(): number {
    return this.options.maxMessageBytes;
  }

  /**
   * Whether chunks travel in binary frames on this connection (`binaryChunks`): a `chunk-put`
   * is sent so, and a `chunk-get` asks for its answer so.
   */
  get binaryChunks(): boolean {
    return this.options.binaryChunks;
  }

  /** Messages not yet confirmed by the relay (queued or in flight). */
  get queued(): number {
    return this.outbox.pending.length + this.keepAlive.inFlight;
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
    this.outbox.routed(to, payload, options.once !== false, this.keepAlive.inFlight);
    this.pump();
  }

  /**
   * Sends a frame of the host's store (documents, chunks: docs/store.md) on this socket only (the
   * answers, `store` and `chunk` events, would come on it): not sent again after a drop. `data`:
   * bytes sent as the frame's last member, in base64 (`Outbox.store`), `frame` then without it. Throws
   * `not_joined`, `message_too_big` above `maxMessageBytes`, `closed` after `close()`.
   */
  sendStoreFrame(frame: HostRequest | WithoutData<HostRequest>, data?: Uint8Array): void {
    if (this.currentState === 'closed' || this.closing !== undefined) {
      throw new RelayError('closed', 'the connection is closed');
    }
    if (this.currentState !== 'joined') {
      throw new SyncError('not_joined', 'store frames go on a joined connection only');
    }
    this.outbox.store(frame as HostRequest, data);
    this.pump();
  }

  /**
   * Resolves once the relay has handled every message sent so far (a `pong` came back after
   * them). Rejects when the connection closes first.
   */
  flush(): Promise<void> {
    const seq = this.outbox.lastSeq;
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
   * (await `flush()` first to keep them). The relay has `cutAfterMs` (2 s) to answer the close
   * handshake before the socket is cut.
   */
  close(options: { leave?: boolean; cutAfterMs?: number } = {}): Promise<void> {
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
    const cancelCut = this.options.clock.after(options.cutAfterMs ?? closeHandshakeMs, () =>
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

  private setState(state: ConnectionState): void {
    if (this.currentState === state) return;
    this.currentState = state;
    this.emit('state', state);
  }

  private open(): void {
    this.setState('connecting');
    const { room, device, token, grant } = this.options;
    const socket = openRelaySocket(
      this.options,
      { type: 'join', room, device, token, ...(grant === undefined ? {} : { grant }) },
      {
        frame: (from, text) => {
          if (this.socket === from) this.handleFrame(from, text);
        },
        binary: (from, bytes) => {
          if (this.socket === from) this.handleBinary(bytes);
        },
        close: (from, code, reason) => {
          if (this.socket === from) this.socketClosed(code, reason);
        },
      },
    );
    if (socket instanceof RelayError) {
      this.emit('error', socket);
      this.finish(1006, socket);
      return;
    }
    this.socket = socket;
    this.timers.set('join', this.options.joinTimeoutMs, () => this.abort(socket, 'join timeout'));
  }

  private handleFrame(socket: WebSocketLike, text: string | NodeBytes): void {
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
      case 'chunk':
        this.emit('chunk', frame.frame);
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

  /** A binary frame: a `chunk` answer in the binary form; anything else is `invalid_frame`. */
  private handleBinary(bytes: Uint8Array): void {
    const chunk = parseBinaryChunk(bytes);
    if (chunk === undefined) {
      this.emit(
        'error',
        new RelayError('invalid_frame', 'the relay sent a binary frame of unknown shape'),
      );
      return;
    }
    this.emit('chunk', chunk);
  }

  /** Emits a routed message, once: a copy sent again after a drop is recognised and skipped. */
  private received(frame: RoutedMessage): void {
    const payload = this.envelope.open(frame.from, frame.payload);
    if (payload === undefined) return;
    this.emit('message', {
      from: frame.from,
      to: frame.to,
      room: frame.room,
      payload,
      ...(frame.role === undefined ? {} : { role: frame.role }),
    });
  }

  private joined(frame: JoinedFrame): void {
    this.timers.clear('join');
    this.options.backoff.reset();
    this.roomHost = frame.host;
    this.role = frame.role;
    this.ownRole = frame.roles?.[String(this.device)] ?? 'owner';
    this.roomDevices = new Set(frame.devices);
    this.setState('joined');
    this.emit('joined', frame);
    for (const waiter of this.firstJoin.splice(0)) waiter.resolve(frame);
    this.keepAlive.start();
    this.pump();
  }

  /** Writes queued messages while the rate allows, then a ping to confirm them (see KeepAlive). */
  private pump(): void {
    const socket = this.socket;
    if (this.currentState !== 'joined' || socket === undefined) return;
    this.timers.clear('pump');
    const pending = this.outbox.pending;
    while (pending.length > 0 && this.bucket.take()) {
      const next = pending.shift()!;
      writeTo(socket, next);
      this.keepAlive.written(next);
    }
    const pingInMs = this.keepAlive.confirmingPingInMs(!pending.length && this.bucket.atRate());
    if (this.keepAlive.needsPing && pingInMs === 0) this.keepAlive.ping();
    if (pending.length > 0 || this.keepAlive.needsPing) {
      this.timers.set('pump', Math.max(this.bucket.waitMs(), pingInMs), () => this.pump());
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
    this.outbox.dropped(this.keepAlive.dropped());
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
