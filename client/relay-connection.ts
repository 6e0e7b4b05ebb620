import {
  AuthFailed,
  MessageTooBig,
  Replaced,
  Revoked,
  UnsupportedData,
} from '../protocol/relay-codes.ts';
import { type BackoffOptions, createBackoff } from './backoff.ts';
import { Emitter } from './emitter.ts';
import { RelayError, SyncError } from './errors.ts';
import {
  type HostFrame,
  type JoinedFrame,
  type PresenceFrame,
  parseRelayFrame,
  type RoutedMessage,
} from './relay-frames.ts';

/** A handler property whose event type each implementation narrows (checked bivariantly). */
type Handler<E> = { bivariant(event: E): void }['bivariant'] | null;

/** The part of the WebSocket API the client uses: the browser's `WebSocket` and `ws` both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: cuts the TCP connection without a close handshake. */
  terminate?: () => void;
  onopen: Handler<unknown>;
  onmessage: Handler<{ data: unknown }>;
  onclose: Handler<{ code: number; reason: string }>;
  onerror: Handler<unknown>;
}

/** A WebSocket class: the global `WebSocket` in browsers, `WebSocket` from `ws` in Node. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Where a message goes: the room's host, everyone else in the room, or one device. */
export type Target = 'host' | 'broadcast' | string | number;

export type ConnectionState = 'idle' | 'connecting' | 'joined' | 'reconnecting' | 'closed';

export interface RelayConnectionOptions {
  /** Relay address, `ws://` or `wss://`. */
  url: string;
  /** Room id of the project (`project.roomId` from the auth service). */
  room: string;
  /** This device's id (the device id inside `token`); kept across reconnects. */
  device: string | number;
  /** Device token. */
  token: string;
  /** Default: the global `WebSocket` (browsers, Node 22+); pass `ws`'s class on Node 20. */
  WebSocket?: WebSocketConstructor;
  /** Reconnect delays (default 250 ms doubling to 10 s, 50 % jitter). */
  backoff?: BackoffOptions;
  /** Messages kept while not joined (and not yet confirmed); `send` throws beyond. Default 1000. */
  maxQueuedMessages?: number;
  /** A `{to, payload}` frame larger than this (UTF-8 bytes) is refused by `send`. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Time from opening the socket to `joined` before the attempt is abandoned. Default 10_000 ms. */
  joinTimeoutMs?: number;
  /** A `ping` is sent after this much quiet, to notice a dead connection. Default 25_000 ms. */
  keepAliveMs?: number;
  /** No `pong` within this: the connection is dead, reconnect. Default 10_000 ms. */
  pongTimeoutMs?: number;
  /** Outgoing frames per second (stays under the relay's `rate.perSecond`, 200). Default 150. */
  ratePerSecond?: number;
  /** Outgoing burst (under the relay's `rate.burst`, 400). Default 300. */
  rateBurst?: number;
  /**
   * Default true: every payload carries `_sync: {s, n}` (sender session and sequence number),
   * removed again on receipt, so that a message sent again after a drop is delivered once.
   * Turn off to talk to clients that do not use this library (payloads then go out unchanged,
   * and a drop at the wrong moment can deliver a message twice).
   */
  dedupe?: boolean;
}

/** Why the connection ended for good. */
export interface CloseInfo {
  /** The last WebSocket close code. */
  code: number;
  /** Set when the relay ended it (auth failure, revoked, replaced...), absent after `close()`. */
  error?: RelayError;
}

export interface RelayEvents {
  /** Joined (again): after a reconnect `buffered` missed messages follow; `gap` = some were lost. */
  joined: (frame: JoinedFrame) => void;
  /** A routed message for this device (the buffered ones first after a rejoin). */
  message: (message: RoutedMessage) => void;
  presence: (frame: PresenceFrame) => void;
  /** The room has a new host. */
  host: (frame: HostFrame) => void;
  /** An error frame from the relay, or the reason the connection ended. */
  error: (error: RelayError) => void;
  state: (state: ConnectionState) => void;
  /** The connection ended for good (`close()` or a relay refusal); no reconnect follows. */
  close: (info: CloseInfo) => void;
}

/** Close codes after which reconnecting cannot help. */
const finalCloses: Record<number, { code: string; message: string }> = {
  [UnsupportedData.code]: { code: 'unsupported_data', message: 'the relay refused a binary frame' },
  [MessageTooBig.code]: {
    code: 'message_too_big',
    message: 'a message was larger than the relay accepts',
  },
  [AuthFailed.code]: { code: 'auth_failed', message: 'the relay refused the join' },
  [Revoked.code]: { code: 'revoked', message: 'this device was revoked' },
  [Replaced.code]: {
    code: 'replaced',
    message: 'this device joined the room on another connection',
  },
};

interface Outgoing {
  seq: number;
  text: string;
}

interface FlushWaiter {
  seq: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** The payload key that carries the sender's session and sequence number. */
export const envelopeKey = '_sync';

/** Receivers remember this many sender sessions for de-duplication. */
const maxRememberedSessions = 1024;

function randomSession(): string {
  const bytes = new Uint8Array(8);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function envelopeOf(payload: Record<string, unknown>): { s: string; n: number } | undefined {
  const envelope = payload[envelopeKey];
  if (typeof envelope !== 'object' || envelope === null) return undefined;
  const { s, n } = envelope as { s?: unknown; n?: unknown };
  return typeof s === 'string' && typeof n === 'number' ? { s, n } : undefined;
}

const pingFrame = '{"type":"ping"}';
const leaveFrame = '{"type":"leave"}';
const encoder = new TextEncoder();

/**
 * One device in one relay room. Joins on `connect()`, reconnects with backoff and jitter under
 * the same device id (so the relay hands over what it buffered), queues what is sent meanwhile
 * and sends it in order after the rejoin. A message counts as delivered to the relay once a
 * `pong` for a later `ping` came back; messages not confirmed when a connection drops are sent
 * again after the rejoin, and receivers drop the copies they already have (see `dedupe`).
 */
export class RelayConnection extends Emitter<RelayEvents> {
  readonly room: string;
  readonly device: string | number;
  private readonly options: RelayConnectionOptions;
  private readonly WebSocketClass: WebSocketConstructor;
  private readonly backoff;
  private socket: WebSocketLike | undefined;
  private currentState: ConnectionState = 'idle';
  private pending: Outgoing[] = [];
  private unconfirmed: Outgoing[] = [];
  /** Outstanding pings: the last seq written before each. */
  private marks: Array<{ seq: number; at: number }> = [];
  private lastSeq = 0;
  private confirmedSeq = 0;
  private flushWaiters: FlushWaiter[] = [];
  private tokens: number;
  private refilledAt = Date.now();
  private lastSentAt = Date.now();
  private timers: {
    reconnect?: ReturnType<typeof setTimeout>;
    join?: ReturnType<typeof setTimeout>;
    pump?: ReturnType<typeof setTimeout>;
    pong?: ReturnType<typeof setTimeout>;
    keepAlive?: ReturnType<typeof setInterval>;
  } = {};
  private firstJoin: { resolve: (f: JoinedFrame) => void; reject: (e: Error) => void }[] = [];
  private roomHost: string | undefined;
  private roomDevices = new Set<string>();
  private role: 'host' | 'member' | undefined;
  private closing: Promise<void> | undefined;
  private readonly session = randomSession();
  /** Highest sequence number seen per sender session (`<from> <session>`). */
  private readonly seen = new Map<string, number>();
  /** The last error frame before a close: its message explains an `auth_failed` close. */
  private lastRefusal: string | undefined;

  constructor(options: RelayConnectionOptions) {
    super();
    this.options = options;
    this.room = options.room;
    this.device = options.device;
    const ctor =
      options.WebSocket ??
      (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket ??
      undefined;
    if (ctor === undefined) {
      throw new SyncError(
        'no_websocket',
        'no WebSocket implementation: pass the WebSocket class of the "ws" package',
      );
    }
    this.WebSocketClass = ctor;
    this.backoff = createBackoff(options.backoff);
    this.tokens = this.burst;
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
    return this.pending.length + this.unconfirmed.length;
  }

  private get burst(): number {
    return this.options.rateBurst ?? 300;
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
   */
  send(to: Target, payload: Record<string, unknown>): void {
    if (this.currentState === 'closed' || this.closing !== undefined) {
      throw new RelayError('closed', 'the connection is closed');
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new SyncError('invalid_message', 'payload must be a JSON object');
    }
    const dedupe = this.options.dedupe ?? true;
    if (dedupe && Object.hasOwn(payload, envelopeKey)) {
      throw new SyncError('invalid_message', `the payload key ${envelopeKey} is reserved`);
    }
    const seq = this.lastSeq + 1;
    const text = JSON.stringify({
      to,
      payload: dedupe ? { ...payload, [envelopeKey]: { s: this.session, n: seq } } : payload,
    });
    const maxBytes = this.options.maxMessageBytes ?? 1_048_576;
    if (encoder.encode(text).length > maxBytes) {
      throw new SyncError('message_too_big', `the message is larger than ${maxBytes} bytes`);
    }
    const maxQueued = this.options.maxQueuedMessages ?? 1000;
    if (this.queued >= maxQueued) {
      throw new SyncError(
        'queue_full',
        `${maxQueued} messages are waiting for the relay; try again after the connection is back`,
      );
    }
    this.lastSeq = seq;
    this.pending.push({ seq, text });
    this.pump();
  }

  /**
   * Resolves once the relay has handled every message sent so far (a `pong` came back after
   * them). Rejects when the connection closes first.
   */
  flush(): Promise<void> {
    const seq = this.lastSeq;
    if (this.confirmedSeq >= seq) return Promise.resolve();
    if (this.currentState === 'closed') {
      return Promise.reject(new RelayError('closed', 'the connection is closed'));
    }
    return new Promise((resolve, reject) => {
      this.flushWaiters.push({ seq, resolve, reject });
    });
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
    this.clearTimer('reconnect');
    let done: () => void = () => undefined;
    this.closing = new Promise<void>((resolve) => {
      done = resolve;
    });
    if (socket === undefined) {
      this.finish(1000);
      done();
      return this.closing;
    }
    const cut = setTimeout(() => this.abort(socket, 'close timeout'), 2_000);
    const stop = this.on('close', () => {
      clearTimeout(cut);
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

  private clearTimer(name: keyof RelayConnection['timers']): void {
    const timer = this.timers[name];
    if (timer === undefined) return;
    clearTimeout(timer);
    delete this.timers[name];
  }

  private open(): void {
    this.setState('connecting');
    let socket: WebSocketLike;
    try {
      socket = new this.WebSocketClass(this.options.url);
    } catch (err: unknown) {
      // A malformed URL: no retry can fix it.
      const error = new RelayError(
        'invalid_url',
        `cannot open ${this.options.url}: ${err instanceof Error ? err.message : String(err)}`,
      );
      this.emit('error', error);
      this.finish(1006, error);
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      socket.send(
        JSON.stringify({
          type: 'join',
          room: this.options.room,
          device: this.options.device,
          token: this.options.token,
        }),
      );
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
    this.timers.join = setTimeout(
      () => this.abort(socket, 'join timeout'),
      this.options.joinTimeoutMs ?? 10_000,
    );
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
        this.pong();
        return;
      case 'error': {
        const error = new RelayError(frame.code, frame.message);
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
    let payload = frame.payload;
    const envelope = envelopeOf(payload);
    if (envelope !== undefined) {
      const key = `${frame.from} ${envelope.s}`;
      const last = this.seen.get(key);
      if (last !== undefined && envelope.n <= last) return;
      this.seen.delete(key);
      this.seen.set(key, envelope.n);
      if (this.seen.size > maxRememberedSessions) {
        this.seen.delete(this.seen.keys().next().value as string);
      }
      const { [envelopeKey]: _, ...rest } = payload;
      payload = rest;
    }
    this.emit('message', { from: frame.from, to: frame.to, room: frame.room, payload });
  }

  private joined(frame: JoinedFrame): void {
    this.clearTimer('join');
    this.backoff.reset();
    this.roomHost = frame.host;
    this.role = frame.role;
    this.roomDevices = new Set(frame.devices);
    this.setState('joined');
    this.emit('joined', frame);
    for (const waiter of this.firstJoin.splice(0)) waiter.resolve(frame);
    this.lastSentAt = Date.now();
    const keepAliveMs = this.options.keepAliveMs ?? 25_000;
    this.timers.keepAlive = setInterval(() => {
      if (Date.now() - this.lastSentAt >= keepAliveMs && this.marks.length === 0) this.ping();
    }, keepAliveMs / 2);
    this.pump();
  }

  private refill(): void {
    const now = Date.now();
    const rate = this.options.ratePerSecond ?? 150;
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) * rate) / 1000);
    this.refilledAt = now;
  }

  /** Writes queued messages while the rate allows, then a ping to confirm them. */
  private pump(): void {
    const socket = this.socket;
    if (this.currentState !== 'joined' || socket === undefined) return;
    this.clearTimer('pump');
    this.refill();
    while (this.pending.length > 0 && this.tokens >= 1) {
      const next = this.pending.shift()!;
      this.tokens--;
      socket.send(next.text);
      this.unconfirmed.push(next);
    }
    if (this.unconfirmed.length > 0 && this.marks.length === 0) this.ping();
    const waiting =
      this.pending.length > 0 || (this.unconfirmed.length > 0 && this.marks.length === 0);
    if (waiting) {
      const rate = this.options.ratePerSecond ?? 150;
      const waitMs = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / rate));
      this.timers.pump = setTimeout(() => this.pump(), waitMs);
    }
  }

  private ping(): void {
    const socket = this.socket;
    if (socket === undefined || this.currentState !== 'joined') return;
    this.refill();
    if (this.tokens < 1) return; // pump() retries
    this.tokens--;
    socket.send(pingFrame);
    this.lastSentAt = Date.now();
    this.marks.push({ seq: this.unconfirmed.at(-1)?.seq ?? this.confirmedSeq, at: Date.now() });
    if (this.timers.pong === undefined) this.armPongWatchdog();
  }

  private armPongWatchdog(): void {
    const socket = this.socket;
    const oldest = this.marks[0];
    if (socket === undefined || oldest === undefined) return;
    const timeoutMs = this.options.pongTimeoutMs ?? 10_000;
    this.timers.pong = setTimeout(
      () => {
        delete this.timers.pong;
        this.abort(socket, 'no pong');
      },
      Math.max(0, oldest.at + timeoutMs - Date.now()),
    );
  }

  private pong(): void {
    const mark = this.marks.shift();
    this.clearTimer('pong');
    if (mark === undefined) return;
    this.armPongWatchdog();
    while (this.unconfirmed.length > 0 && this.unconfirmed[0]!.seq <= mark.seq) {
      this.unconfirmed.shift();
    }
    this.confirmedSeq = Math.max(this.confirmedSeq, mark.seq);
    const waiters = this.flushWaiters;
    this.flushWaiters = [];
    for (const waiter of waiters) {
      if (waiter.seq <= this.confirmedSeq) waiter.resolve();
      else this.flushWaiters.push(waiter);
    }
    this.pump();
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
    for (const name of ['join', 'pump', 'pong', 'keepAlive'] as const) this.clearTimer(name);
    // Whatever the relay did not confirm is sent again after the rejoin, before newer messages.
    this.pending = [...this.unconfirmed, ...this.pending];
    this.unconfirmed = [];
    this.marks = [];
    this.role = undefined;
    if (this.closing !== undefined) {
      this.finish(code);
      return;
    }
    const final = finalCloses[code];
    if (final !== undefined) {
      const why = code === 4001 && this.lastRefusal !== undefined ? this.lastRefusal : reason;
      const error = new RelayError(
        final.code,
        why === '' ? final.message : `${final.message}: ${why}`,
        code,
      );
      this.emit('error', error);
      this.finish(code, error);
      return;
    }
    this.setState('reconnecting');
    const delayMs = this.backoff.next();
    this.timers.reconnect = setTimeout(() => {
      delete this.timers.reconnect;
      if (this.closing === undefined && this.currentState === 'reconnecting') this.open();
    }, delayMs);
  }

  private finish(code: number, error?: RelayError): void {
    for (const name of ['join', 'pump', 'pong', 'keepAlive', 'reconnect'] as const) {
      this.clearTimer(name);
    }
    this.setState('closed');
    const closedError = error ?? new RelayError('closed', 'the connection was closed');
    for (const waiter of this.firstJoin.splice(0)) waiter.reject(closedError);
    for (const waiter of this.flushWaiters.splice(0)) waiter.reject(closedError);
    this.emit('close', error === undefined ? { code } : { code, error });
  }
}

/** Creates a connection (not yet connected: call `connect()`). */
export function createRelayConnection(options: RelayConnectionOptions): RelayConnection {
  return new RelayConnection(options);
}
