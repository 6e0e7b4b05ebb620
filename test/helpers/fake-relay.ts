import type { AddressInfo } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';
import {
  chunkBadSchema,
  chunkGetSchema,
  chunkHaveSchema,
  chunkPutSchema,
  decodeBinaryFrame,
  isJsonObject,
  type JoinedFrame,
  joinSchema,
  leaveSchema,
  pingSchema,
  routeSchema,
} from '../../protocol/relay-frames.ts';

/**
 * A scripted fake of the relay for fast, deterministic client tests: a real `ws` server on
 * 127.0.0.1:0 in the test process that records every frame a client sends and plays what the
 * test tells it (frames, close codes), like centrifuge-js's `fakeServer.ts`. It speaks the
 * relay's wire protocol and nothing more: no tokens, rooms or buffering. By default it answers
 * a `join` with `joined` (the device alone in the room, as host) and a `ping` with `pong`.
 * What a client sends is checked with the relay's own frame schemas: a frame the relay would
 * refuse is recorded as `{type: 'invalid'}` and answered with `invalid_message`.
 */

/**
 * A frame a client sent, parsed: `join`, `leave`, `ping`, `message` for a routed `{to, payload}`,
 * `invalid` (with its `text`) for anything the relay would refuse.
 */
export type SentFrame = Record<string, unknown> & { type: string };

/** One step of a script: a frame to send, a close, or a wait for the client's next frame of a type. */
export type ScriptStep =
  | Record<string, unknown>
  | { close: number; reason?: string }
  | { await: string };

const defaultDeadlineMs = 5_000;

/** The `joined` frame answering `join`: alone in the room and host, nothing buffered. */
export function joinedFor(join: SentFrame, overrides: Partial<JoinedFrame> = {}): JoinedFrame {
  const { room, device } = joinSchema.parse(join);
  return {
    type: 'joined',
    room,
    device,
    role: 'host',
    host: device,
    devices: [device],
    buffered: 0,
    gap: false,
    ...overrides,
  };
}

/** A routed message as the relay delivers it, from device `from` to `to` (default broadcast). */
export function routed(
  from: string,
  payload: Record<string, unknown>,
  to = 'broadcast',
): Record<string, unknown> {
  return { from, to, room: 'fake-room', payload };
}

const controlSchemas = {
  join: joinSchema,
  leave: leaveSchema,
  ping: pingSchema,
  'chunk-put': chunkPutSchema,
  'chunk-have': chunkHaveSchema,
  'chunk-get': chunkGetSchema,
  'chunk-bad': chunkBadSchema,
} as const;

/** What the relay would make of a client's text frame. */
function parseClientFrame(text: string): SentFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err: unknown) {
    if (err instanceof SyntaxError) return { type: 'invalid', text };
    throw err;
  }
  if (!isJsonObject(value)) return { type: 'invalid', text };
  if ('type' in value) {
    const schema = controlSchemas[value.type as keyof typeof controlSchemas];
    return schema?.safeParse(value).success === true
      ? (value as SentFrame)
      : { type: 'invalid', text };
  }
  return routeSchema.safeParse(value).success
    ? { type: 'message', ...value }
    : { type: 'invalid', text };
}

/**
 * What the relay would make of a client's binary frame: a `chunk-put` in the binary form is
 * recorded as its text form would be (`data` in base64) with `binary: true`; anything else is
 * `invalid` (the relay closes with 1003).
 */
function parseBinaryClientFrame(bytes: Buffer): SentFrame {
  const frame = decodeBinaryFrame(bytes);
  if (frame === undefined || frame.header.type !== 'chunk-put') {
    return { type: 'invalid', text: bytes.toString('latin1') };
  }
  const data = Buffer.from(frame.data).toString('base64');
  const parsed = { ...frame.header, data };
  return chunkPutSchema.safeParse(parsed).success
    ? { ...parsed, binary: true }
    : { type: 'invalid', text: JSON.stringify(frame.header) };
}

interface Waiter {
  type: string | undefined;
  resolve: (frame: SentFrame) => void;
}

/** The relay's side of one client connection. */
export class FakeRelayConnection {
  /** Every frame the client sent on this connection, in order. */
  readonly received: SentFrame[] = [];
  /** Settles when the connection is closed, by either side or a cut. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly socket: WebSocket;
  /** How far `next` has read `received`. */
  private cursor = 0;
  private waiters: Waiter[] = [];

  constructor(socket: WebSocket, onFrame: (frame: SentFrame, from: FakeRelayConnection) => void) {
    this.socket = socket;
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    socket.on('message', (data, isBinary) => {
      const frame = isBinary
        ? parseBinaryClientFrame(data as Buffer)
        : parseClientFrame(String(data));
      this.received.push(frame);
      if (frame.type === 'invalid') this.send({ type: 'error', code: 'invalid_message' });
      onFrame(frame, this);
      this.wake();
    });
  }

  /**
   * The client's next frame (of `type`, when given) after the last one `next` returned; frames
   * of other types in between are passed over. Rejects after `deadlineMs`.
   */
  next(type?: string, deadlineMs = defaultDeadlineMs): Promise<SentFrame> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((waiter) => waiter !== entry);
        const seen = JSON.stringify(this.received.slice(-5)).slice(0, 600);
        reject(
          new Error(`no ${type ?? 'frame'} from the client within ${deadlineMs} ms; last: ${seen}`),
        );
      }, deadlineMs);
      const entry: Waiter = {
        type,
        resolve: (frame) => {
          clearTimeout(timer);
          resolve(frame);
        },
      };
      this.waiters.push(entry);
      this.wake();
    });
  }

  /** Sends a frame to the client (an object as JSON, a string as it is). */
  send(frame: object | string): void {
    this.socket.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Closes with a close code and reason, as the relay does (4003 revoked, 4009 replaced...). */
  close(code: number, reason = ''): void {
    this.socket.close(code, reason);
  }

  /** Plays the steps in order: frames are sent, closes closed, awaits wait for the client. */
  async play(steps: ScriptStep[]): Promise<void> {
    for (const step of steps) {
      if ('await' in step && typeof step.await === 'string') await this.next(step.await);
      else if ('close' in step && typeof step.close === 'number') {
        this.close(step.close, typeof step.reason === 'string' ? step.reason : '');
      } else this.send(step);
    }
  }

  private wake(): void {
    while (this.waiters.length > 0) {
      const waiter = this.waiters[0]!;
      const index = this.received.findIndex(
        (frame, i) => i >= this.cursor && (waiter.type === undefined || frame.type === waiter.type),
      );
      if (index === -1) return;
      this.cursor = index + 1;
      this.waiters.shift();
      waiter.resolve(this.received[index]!);
    }
  }
}

export interface FakeRelayOptions {
  /**
   * Plays the answer to a `join`; default: sends `joinedFor(join)`. A test replaces it to
   * refuse (`[{type:'error', code:'auth_failed'}, {close: 4001}]`) or to stay silent.
   */
  onJoin?: (join: SentFrame, connection: FakeRelayConnection) => void;
  /**
   * Answers every other frame (a chunk frame, a `ping`) in the test's stead; when set, the
   * relay itself does not answer pings (`answerPings` is ignored).
   */
  onFrame?: (frame: SentFrame, connection: FakeRelayConnection) => void;
}

/** The fake relay: one `ws` server, every connection it accepted, in order. */
export class FakeRelay {
  /** `ws://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every connection accepted so far, oldest first. */
  readonly connections: FakeRelayConnection[] = [];
  /** Whether a `ping` gets a `pong` (turn off to play a dead connection). */
  answerPings = true;
  onJoin: (join: SentFrame, connection: FakeRelayConnection) => void;
  onFrame: ((frame: SentFrame, connection: FakeRelayConnection) => void) | undefined;
  private readonly server: WebSocketServer;
  private arrivals: Array<() => void> = [];

  private constructor(server: WebSocketServer, options: FakeRelayOptions) {
    this.server = server;
    this.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
    this.onJoin = options.onJoin ?? ((join, connection) => connection.send(joinedFor(join)));
    this.onFrame = options.onFrame;
    server.on('connection', (socket) => {
      this.connections.push(
        new FakeRelayConnection(socket, (frame, from) => this.answer(frame, from)),
      );
      for (const arrived of this.arrivals.splice(0)) arrived();
    });
  }

  /** Starts a fake relay on an ephemeral loopback port. */
  static async start(options: FakeRelayOptions = {}): Promise<FakeRelay> {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    return new FakeRelay(server, options);
  }

  /** The `index`-th connection (0 = the first), once the client opened it. */
  async connection(index: number, deadlineMs = defaultDeadlineMs): Promise<FakeRelayConnection> {
    const until = Date.now() + deadlineMs;
    while (this.connections[index] === undefined) {
      if (Date.now() >= until) {
        throw new Error(`connection ${index} not opened within ${deadlineMs} ms`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, until - Date.now());
        this.arrivals.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.connections[index]!;
  }

  /** Cuts every connection and stops listening. */
  async close(): Promise<void> {
    for (const client of this.server.clients) client.terminate();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private answer(frame: SentFrame, from: FakeRelayConnection): void {
    if (frame.type === 'join') this.onJoin(frame, from);
    else if (this.onFrame !== undefined) this.onFrame(frame, from);
    else if (frame.type === 'ping' && this.answerPings) from.send({ type: 'pong' });
  }
}
