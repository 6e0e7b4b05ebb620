import type { NodeBytes } from '../protocol/base64.ts';
import type { JoinFrame } from '../protocol/relay-frames.ts';
import type {
  ResolvedConnectionOptions,
  TextBytesSocket,
  WebSocketLike,
} from './connection-options.ts';
import { RelayError } from './errors.ts';

/** What one socket of a connection tells its owner, with the socket it is about. */
export interface SocketListeners {
  /** A text frame: a string, or its UTF-8 bytes from a `ws` socket. */
  frame(socket: WebSocketLike, text: string | NodeBytes): void;
  /** A binary frame's bytes (a `chunk` answer in the binary form). */
  binary(socket: WebSocketLike, bytes: Uint8Array): void;
  close(socket: WebSocketLike, code: number, reason: string): void;
}

/**
 * One attempt of a connection: opens a WebSocket to `url`, sends `join` once it is open, and
 * passes on its text frames, its binary frames and its close. Returns `invalid_url` (a malformed URL: no retry can
 * fix it) instead of a socket when the constructor refuses `url`. With `textBytes` (a `ws`
 * socket), frames are passed on as their bytes: a chunk's 350 kB of base64 is then decoded
 * from them (`parseRelayFrame`) without first becoming one large string.
 */
export function openRelaySocket(
  options: Pick<ResolvedConnectionOptions, 'WebSocket' | 'url' | 'textBytes'>,
  join: JoinFrame,
  listeners: SocketListeners,
): WebSocketLike | RelayError {
  const { WebSocket, url, textBytes } = options;
  let socket: WebSocketLike;
  try {
    socket = new WebSocket(url);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    return new RelayError('invalid_url', `cannot open ${url}: ${why}`);
  }
  socket.onopen = () => socket.send(JSON.stringify(join));
  if (textBytes) {
    (socket as unknown as TextBytesSocket).on('message', (data, isBinary) => {
      if (isBinary) listeners.binary(socket, data);
      else listeners.frame(socket, data);
    });
  } else {
    // binary frames as an ArrayBuffer (a browser gives a Blob by default)
    if ('binaryType' in socket) socket.binaryType = 'arraybuffer';
    socket.onmessage = (event) => {
      const { data } = event;
      if (data instanceof ArrayBuffer) listeners.binary(socket, new Uint8Array(data));
      else listeners.frame(socket, typeof data === 'string' ? data : String(data));
    };
  }
  socket.onclose = (event) => listeners.close(socket, event.code, event.reason);
  socket.onerror = () => {
    // A close event follows and decides what happens.
  };
  return socket;
}
