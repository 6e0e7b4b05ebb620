import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { followOrdered } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';
import { roomHash } from './roster.ts';
import { decodeRecord, isRecordOf, isSealedRecord, type StreamFrame } from './stream-record.ts';

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

/** What a node does with what it reads of a room's stream. */
export interface StreamFollower {
  /** Only records sealed with it are taken (record-seal.ts); absent: every record. */
  seal?: RecordSeal;
  /** A frame another node published. */
  frame(f: StreamFrame): void;
  /** A frame this node published (it delivered it itself): its sequence only, not decoded. */
  own(seq: number): void;
  /** The consumer ended or failed; it is made again. */
  error(err: unknown): void;
}

/**
 * Follows the room's stream from `startSeq` (in order, each once) for the node whose name's
 * bytes are `node`; made again from the next sequence when its consumer ends, fails or falls
 * silent (see {@link followOrdered}). A record of another node without a valid seal of the
 * follower's is skipped like one of this node's own (only its sequence counts). Returns its stop.
 */
export function followStream(
  js: JetStreamClient,
  roomId: string,
  startSeq: number,
  node: Buffer,
  follower: StreamFollower,
): () => void {
  const { stream, subject } = streamOf(roomId);
  const { seal } = follower;
  return followOrdered(js, {
    stream,
    from: startSeq,
    onMessage(m) {
      if (isRecordOf(m.data, node)) follower.own(m.seq);
      else if (seal !== undefined && !isSealedRecord(m.data, seal, subject)) follower.own(m.seq);
      else follower.frame(decodeRecord(m));
    },
    onRestart: (err) => follower.error(err),
  });
}

/** A replay read not done within this long is given up (its join is refused after 8 s anyway). */
const readRangeDeadlineMs = 10_000;

/**
 * Reads the frames with sequence in (`after`, `upto`] in order (with `seal`, only those sealed
 * with it); rejects when they cannot be read within {@link readRangeDeadlineMs} (the stream's
 * servers unreachable meanwhile). It ends at `upto` only, whatever the consumer says is pending:
 * a consumer on a server of a NATS cluster that is behind the stream's leader (restarted and
 * catching up) delivers what that server has, and says nothing is pending after its last.
 */
export function readRange(
  js: JetStreamClient,
  roomId: string,
  after: number,
  upto: number,
  seal?: RecordSeal,
): Promise<StreamFrame[]> {
  const { subject } = streamOf(roomId);
  const admit = (data: Uint8Array) => seal === undefined || isSealedRecord(data, seal, subject);
  if (upto <= after) return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    const frames: StreamFrame[] = [];
    let last: unknown;
    const deadline = setTimeout(() => {
      stop();
      reject(
        new Error(
          `room stream not read up to ${upto} within ${readRangeDeadlineMs} ms: ${String(last)}`,
        ),
      );
    }, readRangeDeadlineMs);
    const stop = followOrdered(js, {
      stream: streamOf(roomId).stream,
      from: after + 1,
      onMessage(m) {
        if (m.seq <= upto && admit(m.data)) frames.push(decodeRecord(m));
        if (m.seq < upto) return;
        clearTimeout(deadline);
        stop();
        resolve(frames);
      },
      onRestart(err) {
        last = err;
      },
    });
  });
}
