import {
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { type MsgHdrs, headers as natsHeaders } from '@nats-io/transport-node';
import { roomHash } from './roster.ts';

/** One routed frame as it travels in a room's stream. */
export interface StreamFrame {
  seq: number;
  /** The receiver's device key, or `*` for a broadcast. */
  to: string;
  /** The sender's device key. */
  from: string;
  /** The node that published it, and that node's publication counter. */
  node: string;
  nodeSeq: number;
  frame: Buffer;
}

const msPerNs = 1_000_000;
/** JetStream remembers message ids this long to drop re-sends (at most the retention). */
const maxDuplicateWindowMs = 120_000;

/** The stream and subject of a room: one stream per room, so retention and replay are per room. */
export function streamOf(roomId: string): { stream: string; subject: string } {
  const hash = roomHash(roomId);
  return { stream: `SH_${hash}`, subject: `sync-host.m.${hash}` };
}

/** Creates the room's stream unless it exists; resolves with its last sequence. */
export async function ensureStream(
  jsm: JetStreamManager,
  roomId: string,
  retentionMs: number,
  replicas: number,
): Promise<{ first: number; last: number }> {
  const { stream, subject } = streamOf(roomId);
  try {
    const info = await jsm.streams.info(stream);
    return { first: info.state.first_seq, last: info.state.last_seq };
  } catch {
    const info = await jsm.streams.add({
      name: stream,
      subjects: [subject],
      max_age: retentionMs * msPerNs,
      duplicate_window: Math.min(retentionMs, maxDuplicateWindowMs) * msPerNs,
      num_replicas: replicas,
    });
    return { first: info.state.first_seq, last: info.state.last_seq };
  }
}

/** The first and last sequence now in the room's stream. */
export async function streamBounds(
  jsm: JetStreamManager,
  roomId: string,
): Promise<{ first: number; last: number }> {
  const info = await jsm.streams.info(streamOf(roomId).stream);
  return { first: info.state.first_seq, last: info.state.last_seq };
}

/** `_sync` envelope of the client library: its session and counter make a message id. */
const envelope = /"_sync":\{"s":"([A-Za-z0-9_-]{1,64})","n":(\d{1,16})\}/;

/** The sender's device key from a routed frame (`{"from":<id>,...`). */
export function senderOf(frame: Buffer): string {
  const text = frame.toString('utf8', 0, Math.min(frame.length, 400));
  const start = text.indexOf(':') + 1;
  if (text[start] === '"') {
    let end = start + 1;
    while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
    return JSON.parse(text.slice(start, end + 1)) as string;
  }
  const end = text.indexOf(',', start);
  return text.slice(start, end);
}

/**
 * A frame as published to its room's stream: its bytes, and its routing in headers; a frame with
 * the client library's envelope gets a message id (a re-send with the same id is dropped).
 */
export function encodeFrame(frame: Omit<StreamFrame, 'seq'>): {
  payload: Uint8Array;
  headers: MsgHdrs;
} {
  const h = natsHeaders();
  h.set('t', frame.to);
  h.set('f', frame.from);
  h.set('n', frame.node);
  h.set('q', String(frame.nodeSeq));
  const id = envelope.exec(frame.frame.toString('utf8'));
  if (id) h.set('Nats-Msg-Id', `${frame.from}.${id[1]}.${id[2]}`);
  return { payload: frame.frame, headers: h };
}

function decode(m: JsMsg): StreamFrame {
  const h = m.headers;
  return {
    seq: m.seq,
    to: h?.get('t') ?? '*',
    from: h?.get('f') ?? '',
    node: h?.get('n') ?? '',
    nodeSeq: Number(h?.get('q') ?? 0),
    frame: Buffer.from(m.data),
  };
}

/** Wait before following a room's stream again after its consumer ended or failed. */
const refollowMs = 500;

/**
 * Follows the room's stream from `startSeq` (an ordered consumer: in order, each once). When the
 * consumer ends or cannot be made (NATS failover, a server of a NATS cluster lost, JetStream not
 * ready yet), it is made again from the next sequence after a short wait. Returns its stop.
 */
export function followStream(
  js: JetStreamClient,
  roomId: string,
  startSeq: number,
  onFrame: (frame: StreamFrame) => void,
  onError: (err: unknown) => void,
): () => void {
  let next = Math.max(1, startSeq);
  let stopped = false;
  let messages: { close(): Promise<unknown> } | undefined;
  void (async () => {
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(streamOf(roomId).stream, {
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: next,
        });
        const iterator = await consumer.consume();
        messages = iterator;
        if (stopped) break;
        for await (const m of iterator) {
          next = m.seq + 1;
          onFrame(decode(m));
        }
      } catch (err: unknown) {
        if (!stopped) onError(err);
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, refollowMs));
    }
    await messages?.close();
  })();
  return () => {
    stopped = true;
    void messages?.close();
  };
}

/** Reads the frames with sequence in (`after`, `upto`] in order. */
export async function readRange(
  js: JetStreamClient,
  roomId: string,
  after: number,
  upto: number,
): Promise<StreamFrame[]> {
  if (upto <= after) return [];
  const consumer = await js.consumers.get(streamOf(roomId).stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: after + 1,
  });
  const frames: StreamFrame[] = [];
  const messages = await consumer.consume();
  try {
    for await (const m of messages) {
      if (m.seq <= upto) frames.push(decode(m));
      if (m.seq >= upto || m.info.pending === 0) break;
    }
  } finally {
    await messages.close();
  }
  return frames;
}
