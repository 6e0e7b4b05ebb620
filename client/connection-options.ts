import { type NodeBytes, nodeBuffer } from '../protocol/base64.ts';
import { type Backoff, type BackoffOptions, createBackoff } from './backoff.ts';
import { type Clock, systemClock } from './clock.ts';
import { SyncError } from './errors.ts';

/** A handler property whose event type each implementation narrows (checked bivariantly). */
type Handler<E> = { bivariant(event: E): void }['bivariant'] | null;

/** The part of the WebSocket API the client uses: the browser's `WebSocket` and `ws` both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  /** Set to `arraybuffer` where the socket has it: binary frames then come as an ArrayBuffer. */
  binaryType?: string;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: cuts the TCP connection without a close handshake. */
  terminate?: () => void;
  onopen: Handler<unknown>;
  onmessage: Handler<{ data: unknown }>;
  onclose: Handler<{ code: number; reason: string }>;
  onerror: Handler<unknown>;
}

/**
 * A `ws` socket, which sends bytes as a text frame when told `binary: false` (see `textBytes`);
 * a browser's socket sends bytes as a binary frame, which the relay takes only for a chunk in
 * the binary form. Its `message` events give a frame's bytes, undecoded, and whether it was
 * binary.
 */
export interface TextBytesSocket {
  send(data: Uint8Array, options: { binary: false }): void;
  on(event: 'message', listener: (data: NodeBytes, isBinary: boolean) => void): void;
}

/** A WebSocket class: the global `WebSocket` in browsers, `WebSocket` from `ws` in Node. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** What `createRelayConnection` takes; only the first four are required. */
export interface RelayConnectionOptions {
  /** Relay address, `ws://` or `wss://`. */
  url: string;
  /** Room id of the project (`project.roomId` from the auth service). */
  room: string;
  /** This device's id (the device id inside `token`); kept across reconnects. */
  device: string | number;
  /** Device token. */
  token: string;
  /**
   * A member's room grant for a project shared with this device's user (`grant` of the project
   * in `GET /auth/projects`); absent for the user's own projects.
   */
  grant?: string;
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
  /** Time and timers of every timeout above. Default: the system's; tests move their own. */
  clock?: Clock;
  /**
   * Default true: a file's chunks travel in binary frames (a `chunk-put` sent as one, a
   * `chunk-get` asking for its answer as one): a third fewer bytes than base64 in text frames,
   * and no base64 to encode or decode at either end. false: text frames with base64 `data`,
   * which every host accepts (a host from before binary frames closes a binary one with 1003).
   */
  binaryChunks?: boolean;
}

/** The options with every default applied and checked, as the connection uses them. */
export type ResolvedConnectionOptions = Readonly<
  Required<Omit<RelayConnectionOptions, 'backoff' | 'grant'>> & {
    /** A member's room grant, when the room is of a project shared with this device's user. */
    grant: string | undefined;
    /** The reconnect delays, built from the `backoff` option. */
    backoff: Backoff;
    /**
     * Whether the sockets take a frame's UTF-8 bytes as a text frame: `ws`'s do (their class has
     * `terminate`), in Node. A store frame with base64 data is then written straight into one
     * buffer, where a string would be scanned and copied again by the socket.
     */
    textBytes: boolean;
  }
>;

/** The defaults of the optional numbers and flags (documented on each option). */
export const connectionDefaults = {
  maxQueuedMessages: 1000,
  maxMessageBytes: 1_048_576,
  joinTimeoutMs: 10_000,
  keepAliveMs: 25_000,
  pongTimeoutMs: 10_000,
  ratePerSecond: 150,
  rateBurst: 300,
  dedupe: true,
  binaryChunks: true,
} as const;

function invalid(message: string): SyncError {
  return new SyncError('invalid_options', message);
}

/** A whole number of at least 1 (counts and sizes). */
function checkCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw invalid(`${name} must be a whole number of at least 1 (got ${value})`);
  }
  return value;
}

/** A finite number above 0 (durations and rates). */
function checkPositive(name: string, value: number): number {
  if (!(value > 0 && Number.isFinite(value))) {
    throw invalid(`${name} must be a finite number above 0 (got ${value})`);
  }
  return value;
}

/**
 * Applies the defaults once and rejects options that cannot work with an exact message
 * (`SyncError` `invalid_options`): no WebSocket class, a burst below one frame (nothing could
 * ever be sent), zero or negative sizes, rates and timeouts. Backoff options are checked by
 * `createBackoff` (a `RangeError`).
 */
export function resolveConnectionOptions(
  options: RelayConnectionOptions,
): ResolvedConnectionOptions {
  const WebSocket =
    options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (WebSocket === undefined) {
    throw new SyncError(
      'no_websocket',
      'no WebSocket implementation: pass the WebSocket class of the "ws" package',
    );
  }
  const d = connectionDefaults;
  const rateBurst = options.rateBurst ?? d.rateBurst;
  if (!(rateBurst >= 1 && Number.isFinite(rateBurst))) {
    throw invalid(`rateBurst must be at least 1, or nothing could ever be sent (got ${rateBurst})`);
  }
  return {
    url: options.url,
    room: options.room,
    device: options.device,
    token: options.token,
    grant: options.grant,
    WebSocket,
    backoff: createBackoff(options.backoff),
    maxQueuedMessages: checkCount(
      'maxQueuedMessages',
      options.maxQueuedMessages ?? d.maxQueuedMessages,
    ),
    maxMessageBytes: checkCount('maxMessageBytes', options.maxMessageBytes ?? d.maxMessageBytes),
    joinTimeoutMs: checkPositive('joinTimeoutMs', options.joinTimeoutMs ?? d.joinTimeoutMs),
    keepAliveMs: checkPositive('keepAliveMs', options.keepAliveMs ?? d.keepAliveMs),
    pongTimeoutMs: checkPositive('pongTimeoutMs', options.pongTimeoutMs ?? d.pongTimeoutMs),
    ratePerSecond: checkPositive('ratePerSecond', options.ratePerSecond ?? d.ratePerSecond),
    rateBurst,
    dedupe: options.dedupe ?? d.dedupe,
    binaryChunks: options.binaryChunks ?? d.binaryChunks,
    clock: options.clock ?? systemClock,
    textBytes: nodeBuffer !== undefined && typeof WebSocket.prototype?.terminate === 'function',
  };
}
