import type { Socket } from 'node:net';
import { type ClientOptions, WebSocket } from 'ws';
import { decodeBinaryFrame, encodeBinaryFrame } from '../../protocol/relay-frames.ts';
import { createWakeup, defaultDeadlineMs, withDeadline } from './wait.ts';

/**
 * A parsed frame from the relay. A binary frame (a `chunk` in the binary form) is its header's
 * members with `binary: true` and its bytes as `bytes`.
 */
export type Frame = Record<string, unknown> & { type?: string };

/** A binary frame as a `Frame`; one that is not in the binary form: `{type: 'undecodable'}`. */
function binaryFrameOf(bytes: Buffer): Frame {
  const frame = decodeBinaryFrame(bytes);
  if (frame === undefined) return { type: 'undecodable', binary: true };
  return { ...frame.header, binary: true, bytes: Buffer.from(frame.data) };
}

export interface CloseInfo {
  code: number;
  reason: string;
}

/**
 * A real `ws` client that records every frame and lets a test wait for one with a deadline
 * (never a fixed sleep). Frames are consumed by `next`/`take` so each is matched once.
 */
export class RelayClient {
  readonly socket: WebSocket;
  /** Every frame received, in order. */
  readonly frames: Frame[] = [];
  /** Raw text of every frame received, in order (for byte-for-byte checks). */
  readonly texts: string[] = [];
  readonly closed: Promise<CloseInfo>;
  readonly opened: Promise<void>;
  private readonly taken = new Set<number>();
  /** Pings sent and pongs received: the relay answers pings in order, so pong n answers ping n. */
  private pingsSent = 0;
  private pongsReceived = 0;
  private readonly arrived = createWakeup();
  closeInfo: CloseInfo | undefined;

  /**
   * `autoPong: false` makes a client that never answers the relay's pings; `ws` adds socket
   * options (TLS trust, the Host header, a local address).
   */
  constructor(url: string, options: { autoPong?: boolean; ws?: ClientOptions } = {}) {
    this.socket = new WebSocket(url, { ...options.ws, autoPong: options.autoPong ?? true });
    this.socket.on('message', (data, isBinary) => {
      const text = isBinary ? '' : String(data);
      this.texts.push(text);
      const frame = isBinary ? binaryFrameOf(data as Buffer) : (JSON.parse(text) as Frame);
      if (frame.type === 'pong') this.pongsReceived++;
      this.frames.push(frame);
      this.arrived.wake();
    });
    this.closed = new Promise((resolve) => {
      this.socket.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
        this.arrived.wake();
      });
    });
    this.opened = new Promise((resolve, reject) => {
      this.socket.once('open', () => resolve());
      this.socket.once('error', reject);
    });
    this.socket.on('error', () => {
      // reported through `closed`
    });
  }

  /** Sends `header` and `data` in the binary form (a `chunk-put`), or raw bytes as a binary frame. */
  sendBinary(header: object | Buffer, data: Buffer = Buffer.alloc(0)): void {
    const frame = Buffer.isBuffer(header)
      ? header
      : encodeBinaryFrame(header as Record<string, unknown>, data);
    this.socket.send(frame, { binary: true });
  }

  /** Sends an object as JSON, or a string as it is. */
  send(frame: object | string): void {
    const text = typeof frame === 'string' ? frame : JSON.stringify(frame);
    if (text === '{"type":"ping"}') this.pingsSent++;
    this.socket.send(text);
  }

  /** The first not yet consumed frame matching `match`; waits for it until the deadline. */
  async take(match: (frame: Frame) => boolean, deadlineMs = defaultDeadlineMs): Promise<Frame> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      for (let i = 0; i < this.frames.length; i++) {
        const frame = this.frames[i]!;
        if (!this.taken.has(i) && match(frame)) {
          this.taken.add(i);
          return frame;
        }
      }
      const left = until - Date.now();
      if (left <= 0 || this.closeInfo !== undefined) {
        throw new Error(
          `no matching frame within ${deadlineMs} ms; got ${JSON.stringify(this.frames).slice(0, 600)}${
            this.closeInfo ? ` (closed ${this.closeInfo.code})` : ''
          }`,
        );
      }
      await this.arrived.next(left);
    }
  }

  /** The next frame of a type. */
  next(type: string, deadlineMs?: number): Promise<Frame> {
    return this.take((frame) => frame.type === type, deadlineMs);
  }

  /** The next `error` frame with this code. */
  error(code: string): Promise<Frame> {
    return this.take((frame) => frame.type === 'error' && frame.code === code);
  }

  /** The next routed message (a frame with `from`). */
  message(deadlineMs?: number): Promise<Frame> {
    return this.take((frame) => frame.type === undefined && 'from' in frame, deadlineMs);
  }

  /** Routed messages received so far and not consumed. */
  unconsumedMessages(): Frame[] {
    return this.frames.filter(
      (frame, i) => !this.taken.has(i) && frame.type === undefined && 'from' in frame,
    );
  }

  /** Every routed message received so far, consumed or not. */
  allMessages(): Frame[] {
    return this.frames.filter((frame) => frame.type === undefined && 'from' in frame);
  }

  /**
   * A round trip through the relay: once the pong is here, everything the relay sent to this
   * socket before handling our ping has arrived.
   */
  async sync(): Promise<void> {
    this.send({ type: 'ping' });
    // the pong of this ping, not an earlier one still unconsumed (a pong is consumed as before)
    const answer = this.pingsSent;
    await this.take((frame) => frame.type === 'pong' && this.pongsReceived >= answer);
  }

  /** Joins; resolves with the `joined` or `error` answer (waited for up to `deadlineMs`). */
  async join(
    room: string,
    device: string | number,
    token: string,
    deadlineMs = defaultDeadlineMs,
  ): Promise<Frame> {
    await this.opened;
    this.send({ type: 'join', room, device, token });
    return this.take((frame) => frame.type === 'joined' || frame.type === 'error', deadlineMs);
  }

  /** Joins a room of another user with a member's grant; resolves as `join` does. */
  async joinWithGrant(
    room: string,
    device: string | number,
    token: string,
    grant: string | undefined,
  ): Promise<Frame> {
    await this.opened;
    this.send({ type: 'join', room, device, token, ...(grant === undefined ? {} : { grant }) });
    return this.take((frame) => frame.type === 'joined' || frame.type === 'error');
  }

  waitClosed(deadlineMs = defaultDeadlineMs): Promise<CloseInfo> {
    return withDeadline(this.closed, deadlineMs, `not closed within ${deadlineMs} ms`);
  }

  /** Closes without `leave` and waits for the close to complete. */
  async close(): Promise<void> {
    if (this.closeInfo !== undefined) return;
    this.socket.close();
    await this.closed;
  }

  /** Cuts the TCP connection without a close handshake (an abrupt drop). */
  terminate(): void {
    this.socket.terminate();
  }
}

/** The HTTP status a WebSocket upgrade to `url` is answered with (101: accepted). */
export function upgradeStatus(
  url: string,
  localAddress?: string,
  headers: Record<string, string> = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { ...(localAddress ? { localAddress } : {}), headers });
    socket.on('open', () => {
      socket.terminate();
      resolve(101);
    });
    socket.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      socket.terminate();
    });
    socket.on('error', reject);
  });
}

/** The TCP socket under a client: paused, the client stops reading (the kernel buffers fill). */
export function tcpOf(client: RelayClient): Socket {
  return (client.socket as unknown as { _socket: Socket })._socket;
}
