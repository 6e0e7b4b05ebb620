import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { roomHash } from './roster.ts';
import { decodeRecord, isRecordOf, type StreamFrame } from './stream-record.ts';

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

/** Wait before following a room's stream again after its consumer ended or failed. */
const refollowMs = 500;

/** What a node does with what it reads of a room's stream. */
export interface StreamFollower {
  /** A frame another node published. */
  frame(f: StreamFrame): void;
  /** A frame this node published (it delivered it itself): its sequence only, not decoded. */
  own(seq: number): void;
  /** The consumer ended or failed; it is made again. */
  error(err: unknown): void;
}

/**
 * Follows the room's stream from `startSeq` (an ordered consumer: in order, each once) for the
 * node whose name's bytes are `node`. When the consumer ends or cannot be made (NATS failover, a
 * server of a NATS cluster lost, JetStream not ready yet), it is made again from the next
 * sequence after a short wait. Returns its stop.
 */
export function followStream(
  js: JetStreamClient,
  roomId: string,
  startSeq: number,
  node: Buffer,
  follower: StreamFollower,
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
          if (isRecordOf(m.data, node)) follower.own(m.seq);
          else follower.frame(decodeRecord(m));
        }
      } catch (err: unknown) {
        if (!stopped) follower.error(err);
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
      if (m.seq <= upto) frames.push(decodeRecord(m));
      if (m.seq >= upto || m.info.pending === 0) break;
    }
  } finally {
    await messages.close();
  }
  return frames;
}
