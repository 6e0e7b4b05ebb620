import type { JoinFrame } from '../protocol/relay-frames.ts';
import type { WebSocketConstructor, WebSocketLike } from './connection-options.ts';
import { RelayError } from './errors.ts';

/** What one socket of a connection tells its owner, with the socket it is about. */
export interface SocketListeners {
  frame(socket: WebSocketLike, text: string): void;
  close(socket: WebSocketLike, code: number, reason: string): void;
}

/**
 * One attempt of a connection: opens a WebSocket to `url`, sends `join` once it is open, and
 * passes on its text frames and its close. Returns `invalid_url` (a malformed URL: no retry can
 * fix it) instead of a socket when the constructor refuses `url`.
 */
export function openRelaySocket(
  WebSocket: WebSocketConstructor,
  url: string,
  join: JoinFrame,
  listeners: SocketListeners,
): WebSocketLike | RelayError {
  let socket: WebSocketLike;
  try {
    socket = new WebSocket(url);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    return new RelayError('invalid_url', `cannot open ${url}: ${why}`);
  }
  socket.onopen = () => socket.send(JSON.stringify(join));
  socket.onmessage = (event) => {
    listeners.frame(socket, typeof event.data === 'string' ? event.data : String(event.data));
  };
  socket.onclose = (event) => listeners.close(socket, event.code, event.reason);
  socket.onerror = () => {
    // A close event follows and decides what happens.
  };
  return socket;
}
