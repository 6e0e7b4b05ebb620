import { base64Length, nodeBuffer, writeBase64 } from '../protocol/base64.ts';
import { binaryFrameBytes, encodeBinaryFrame } from '../protocol/relay-frames.ts';
import { toBase64 } from './base64.ts';
import type { TextBytesSocket, WebSocketLike } from './connection-options.ts';
import type { DedupeEnvelope } from './dedupe-envelope.ts';
import { SyncError } from './errors.ts';
import type { Outgoing } from './keep-alive.ts';
import type { Target } from './relay-events.ts';
import type { HostRequest } from './store-frames.ts';

const encoder = new TextEncoder();

/** The limits of what a connection keeps waiting (see `RelayConnectionOptions`). */
export interface OutboxOptions {
  maxMessageBytes: number;
  maxQueuedMessages: number;
  dedupe: boolean;
  /** Store frames with data are kept as their UTF-8 bytes (see `ResolvedConnectionOptions`). */
  textBytes: boolean;
  /** A `chunk-put` goes in the binary form (see `RelayConnectionOptions.binaryChunks`). */
  binaryChunks: boolean;
}

/**
 * Writes a pending frame: a string as text, bytes as a text frame of `ws` (`textBytes`), a
 * frame in the binary form as a binary frame (every socket sends bytes so).
 */
export function writeTo(socket: WebSocketLike, out: Outgoing): void {
  const { text } = out;
  if (typeof text === 'string') socket.send(text);
  else if (out.binary === true) (socket as unknown as BinarySocket).send(text);
  else (socket as unknown as TextBytesSocket).send(text, { binary: false });
}

/** A socket sending bytes: a binary frame, in browsers and with `ws` alike. */
interface BinarySocket {
  send(data: Uint8Array): void;
}

/**
 * The frame `head` + the base64 of `data` + `"}` as `bytes` UTF-8 bytes in one buffer (Node
 * only): the base64 is written into it a piece at a time, never held as one large string.
 */
function withData(head: string, data: Uint8Array, bytes: number): Uint8Array {
  const out = nodeBuffer!.allocUnsafe(bytes);
  const at = writeBase64(out, out.write(head, 0, 'utf8'), data);
  out.write('"}', at, 'latin1');
  return out;
}

/**
 * What a connection has yet to write, in order: routed messages (kept while not joined, sent
 * again after a drop) and frames of the host's store (meaningful on their socket only), numbered
 * in one sequence so that a `pong` confirms both.
 */
export class Outbox {
  /** Waiting to be written: queued while not joined, or held back by the rate. */
  pending: Outgoing[] = [];
  /** The sequence number of the last frame taken in. */
  lastSeq = 0;

  constructor(
    private readonly options: OutboxOptions,
    private readonly envelope: DedupeEnvelope,
  ) {}

  /**
   * Takes in a routed message; `inFlight` is how many are written but not confirmed. Throws
   * `invalid_message`, `message_too_big`, `queue_full`.
   */
  routed(to: Target, payload: Record<string, unknown>, once: boolean, inFlight: number): void {
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new SyncError('invalid_message', 'payload must be a JSON object');
    }
    const { dedupe, maxQueuedMessages } = this.options;
    const seq = this.lastSeq + 1;
    const text = JSON.stringify({
      to,
      payload: dedupe && once ? this.envelope.seal(payload, seq) : payload,
    });
    this.checkSize(text);
    if (this.pending.length + inFlight >= maxQueuedMessages) {
      throw new SyncError(
        'queue_full',
        `${maxQueuedMessages} messages are waiting for the relay; try again after the connection is back`,
      );
    }
    this.lastSeq = seq;
    this.pending.push({ seq, text });
  }

  /**
   * Takes in a frame of the host's store. `data`, when given, is written in base64 as the
   * frame's last member without passing through `JSON.stringify`, which would scan and copy it
   * (a chunk's 350 KB) for characters to escape that base64 never has: a third of a sending
   * device's time on a large file. Throws `message_too_big`.
   */
  store(frame: HostRequest, data?: Uint8Array): void {
    if (data !== undefined && frame.type === 'chunk-put' && this.options.binaryChunks) {
      this.binary(frame, data);
      return;
    }
    let text: string | Uint8Array = JSON.stringify(frame);
    if (data === undefined) this.checkSize(text);
    else {
      const head = `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}"data":"`;
      const bytes = this.checkSize(head, base64Length(data.length) + 2);
      text = this.options.textBytes ? withData(head, data, bytes) : `${head}${toBase64(data)}"}`;
    }
    this.lastSeq += 1;
    this.pending.push({ seq: this.lastSeq, text, volatile: true });
  }

  /**
   * A `chunk-put` in the binary form: its members, then its bytes as they are (no base64).
   * Throws `message_too_big`.
   */
  private binary(frame: HostRequest, data: Uint8Array): void {
    const { maxMessageBytes } = this.options;
    if (binaryFrameBytes(frame, data.length) > maxMessageBytes) {
      throw new SyncError('message_too_big', `the message is larger than ${maxMessageBytes} bytes`);
    }
    const text = encodeBinaryFrame(frame, data);
    this.lastSeq += 1;
    this.pending.push({ seq: this.lastSeq, text, volatile: true, binary: true });
  }

  /**
   * After a drop: what the relay did not confirm goes again after the rejoin, before newer
   * messages, except the store frames (their answers would have come on the lost socket).
   */
  dropped(unconfirmed: Outgoing[]): void {
    this.pending = [...unconfirmed, ...this.pending].filter((out) => !out.volatile);
  }

  /**
   * Throws `message_too_big` for a frame above `maxMessageBytes`: `text` and `asciiBytes` more
   * bytes of ASCII.
   */
  private checkSize(text: string, asciiBytes = 0): number {
    const { maxMessageBytes } = this.options;
    // Node counts the bytes without encoding them.
    const bytes =
      (nodeBuffer?.byteLength(text, 'utf8') ?? encoder.encode(text).length) + asciiBytes;
    if (bytes > maxMessageBytes) {
      throw new SyncError('message_too_big', `the message is larger than ${maxMessageBytes} bytes`);
    }
    return bytes;
  }
}
