import type { CloseEvent, RelayErrorCode } from '../../protocol/relay-codes.ts';
import type { Connection } from './connection.ts';
import { countError, type RelayMetrics } from './metrics.ts';

/**
 * How the relay tells a client that something went wrong: a `{"type":"error"}` frame (the
 * connection stays open) or a close with a named code.
 */

/** Error frames kept serialized, by code and message (the messages are a fixed set). */
const errorFrames = new Map<string, Buffer>();
const maxKeptErrorFrames = 256;

/** A pre-serialized `{type:'error'}` frame for the fixed messages (no allocation per error). */
function errorFrame(code: RelayErrorCode, message: string): Buffer {
  const key = `${code}\u0000${message}`;
  let frame = errorFrames.get(key);
  if (frame === undefined) {
    frame = Buffer.from(JSON.stringify({ type: 'error', code, message }));
    if (errorFrames.size < maxKeptErrorFrames) errorFrames.set(key, frame);
  }
  return frame;
}

/** Sends `{"type":"error","code","message"}` and counts it by code; the connection stays open. */
export function sendError(
  conn: Connection,
  metrics: RelayMetrics,
  code: RelayErrorCode,
  message: string,
): void {
  countError(metrics, code);
  conn.queue.send(errorFrame(code, message));
}

/** Stops handling the connection's frames and closes it with a named close code. */
export function closeWith(conn: Connection, event: CloseEvent): void {
  conn.queue.end();
  const state = conn.socket.readyState;
  if (state === conn.socket.OPEN || state === conn.socket.CONNECTING) {
    conn.socket.close(event.code, event.reason);
  }
}

/** A connection that did not answer the heartbeat: cut without a close frame. */
export function terminate(conn: Connection): void {
  conn.queue.end();
  conn.socket.terminate();
}
