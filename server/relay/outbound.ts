import type { Connection, Outbound } from './connection.ts';

/**
 * What the relay writes to its receivers, and the bounds on what it holds unsent.
 *
 * Frames are handed to a receiver's socket at once while the socket keeps up; its writes are
 * corked until the end of the event-loop turn so that one turn's frames leave in one `writev`.
 * When the kernel does not take a receiver's bytes (it stopped reading), the frames that follow
 * wait in the connection's own queue (`pending`) and are handed over on the socket's `drain`,
 * a slice at a time: the socket's write buffer stays small, and every frame still queued is
 * known, so a receiver closed for slowness (1013) or that drops has them kept for it (buffered)
 * instead of losing them. A receiver's unsent bytes are its queue plus its socket's write
 * buffer; past `maxQueuedBytes` for one receiver, or `maxMemoryBytes` for the whole relay, the
 * receivers with the most unsent bytes are closed at the end of the turn.
 */

/** The bounds of one relay; `cut` closes a receiver past them (see `Outbound`). */
export function createOutbound(
  maxQueuedBytes: number,
  maxMemoryBytes: number,
  cut: (conn: Connection) => void,
): Outbound {
  return {
    maxQueuedBytes,
    maxMemoryBytes,
    queuedBytes: 0,
    socketBytes: 0,
    behind: new Set(),
    cut,
  };
}

/** The unsent bytes of a receiver: its queue and its socket's write buffer. */
export function unsentBytes(conn: Connection): number {
  return conn.pendingBytes + conn.stream.writableLength;
}

const textFrame = { binary: false } as const;

/**
 * Above this many bytes in one receiver's corked write buffer, they are written out before the
 * end of the turn: a receiver that does not take them is behind from then on.
 */
const flushAtBytes = 1024 * 1024;
/** On `drain`, frames are handed from the queue to the socket until its buffer holds this much. */
const drainSliceBytes = 256 * 1024;

let corked: Connection[] = [];
/** Frames written to corked streams since the last flush. */
let corkedFrames = 0;
/**
 * Above this many frames held in one event-loop turn everything is flushed at once: with
 * thousands of busy connections a single turn can read megabytes, and holding every reply
 * until its end costs more (memory, GC) than the system calls it saves.
 */
const maxCorkedFrames = 8192;
/** Relays with a receiver past a bound, checked at the end of the turn. */
let over: Outbound[] = [];
let turnEndScheduled = false;

function scheduleTurnEnd(): void {
  if (turnEndScheduled) return;
  turnEndScheduled = true;
  setImmediate(turnEnd);
}

/**
 * The end of the turn: writes out every corked socket (a socket that does not take its bytes is
 * behind from now on), then closes the receivers past a bound.
 */
function turnEnd(): void {
  turnEndScheduled = false;
  const conns = corked;
  corked = [];
  corkedFrames = 0;
  for (const conn of conns) {
    conn.stream.uncork();
    if (conn.pending === undefined) checkBehind(conn);
  }
  if (over.length === 0) return;
  const relays = over;
  over = [];
  for (const outbound of relays) enforce(outbound);
}

/**
 * Holds a receiver's writes until the end of this event-loop turn, so that every frame routed
 * to it while the relay handles one batch of input leaves in one `writev` instead of one system
 * call per frame (the dominant cost of a small message otherwise).
 */
function cork(conn: Connection): void {
  if (conn.stream.writableCorked > 0) return;
  conn.stream.cork();
  corked.push(conn);
  scheduleTurnEnd();
}

/** Writes out what is held now; the streams stay corked until the end of the turn. */
function flushCorked(): void {
  corkedFrames = 0;
  for (const conn of corked) {
    conn.stream.uncork();
    conn.stream.cork();
  }
}

/** Sends an already serialized text frame; the same Buffer is shared by every receiver. */
export function sendData(conn: Connection, data: Buffer): void {
  if (conn.pending !== undefined) {
    enqueue(conn, data);
    return;
  }
  if (conn.socket.readyState !== conn.socket.OPEN) return;
  cork(conn);
  conn.socket.send(data, textFrame);
  if (conn.stream.writableLength > flushAtBytes) {
    conn.stream.uncork();
    conn.stream.cork();
    checkBehind(conn);
  }
  if (++corkedFrames >= maxCorkedFrames) flushCorked();
}

/** Sends a control frame (`joined`, `presence`, `error`...), in order with the routed ones. */
export function sendControl(conn: Connection, frame: object): void {
  sendData(conn, Buffer.from(JSON.stringify(frame)));
}

/**
 * After a write-out: a socket still holding bytes it asked to be drained of is behind; what
 * follows waits in the connection's queue until `drain`.
 */
function checkBehind(conn: Connection): void {
  const stream = conn.stream;
  if (!stream.writableNeedDrain || stream.writableLength === 0) return;
  if (conn.socket.readyState !== conn.socket.OPEN) return;
  const outbound = conn.outbound;
  conn.pending = [];
  conn.pendingHead = 0;
  conn.socketBytes = stream.writableLength;
  outbound.socketBytes += conn.socketBytes;
  outbound.behind.add(conn);
  stream.once('drain', () => drain(conn));
  checkBounds(conn);
}

/** A frame for a receiver that is behind: into its queue. */
function enqueue(conn: Connection, data: Buffer): void {
  if (conn.done) return;
  (conn.pending as Buffer[]).push(data);
  conn.pendingBytes += data.length;
  conn.outbound.queuedBytes += data.length;
  checkBounds(conn);
}

function checkBounds(conn: Connection): void {
  const outbound = conn.outbound;
  if (
    conn.pendingBytes + conn.socketBytes > outbound.maxQueuedBytes + conn.allowanceBytes ||
    outbound.queuedBytes + outbound.socketBytes > outbound.maxMemoryBytes
  ) {
    if (!over.includes(outbound)) over.push(outbound);
    scheduleTurnEnd();
  }
}

/** The socket took its buffer: hands it the next slice of the queue. */
function drain(conn: Connection): void {
  const pending = conn.pending;
  if (pending === undefined) return;
  const { stream, socket, outbound } = conn;
  if (socket.readyState !== socket.OPEN) return;
  stream.cork();
  let head = conn.pendingHead;
  let handed = 0;
  while (head < pending.length && stream.writableLength < drainSliceBytes) {
    const data = pending[head] as Buffer;
    pending[head++] = undefined as unknown as Buffer;
    handed += data.length;
    socket.send(data, textFrame);
  }
  stream.uncork();
  conn.pendingBytes -= handed;
  outbound.queuedBytes -= handed;
  outbound.socketBytes += stream.writableLength - conn.socketBytes;
  conn.socketBytes = stream.writableLength;
  if (head < pending.length) {
    // drop what was handed over once it is most of the array
    if (head > 1024 && head * 2 > pending.length) {
      conn.pending = pending.slice(head);
      head = 0;
    }
    conn.pendingHead = head;
    stream.once('drain', () => drain(conn));
    return;
  }
  conn.pending = [];
  conn.pendingHead = 0;
  if (stream.writableNeedDrain && stream.writableLength > 0) {
    stream.once('drain', () => drain(conn));
    return;
  }
  conn.allowanceBytes = 0;
  caughtUp(conn);
}

/** The connection is no longer behind: frames go to its socket at once again. */
function caughtUp(conn: Connection): void {
  conn.pending = undefined;
  conn.pendingHead = 0;
  release(conn);
}

/** Stops counting a connection (caught up, or its socket closed). */
export function release(conn: Connection): void {
  const outbound = conn.outbound;
  if (!outbound.behind.delete(conn)) return;
  outbound.queuedBytes -= conn.pendingBytes;
  outbound.socketBytes -= conn.socketBytes;
  conn.pendingBytes = 0;
  conn.socketBytes = 0;
}

/**
 * Takes the frames still queued for a connection (never handed to its socket), in order: what
 * a receiver that is closed or dropped would have received next. Its socket's buffer stays
 * counted until the socket closes (`release`).
 */
export function takePending(conn: Connection): Buffer[] {
  const pending = conn.pending;
  if (pending === undefined || conn.pendingHead >= pending.length) return [];
  const frames = pending.slice(conn.pendingHead);
  conn.pending = [];
  conn.pendingHead = 0;
  conn.outbound.queuedBytes -= conn.pendingBytes;
  conn.pendingBytes = 0;
  return frames;
}

/**
 * Closes the receivers past a bound: each one past `maxQueuedBytes`, then, while the relay is
 * past `maxMemoryBytes`, the ones with the most unsent bytes first.
 */
function enforce(outbound: Outbound): void {
  for (const conn of [...outbound.behind]) {
    if (conn.pendingBytes + conn.socketBytes > outbound.maxQueuedBytes + conn.allowanceBytes) {
      cutBehind(outbound, conn);
    }
  }
  if (outbound.queuedBytes + outbound.socketBytes <= outbound.maxMemoryBytes) return;
  const slowest = [...outbound.behind].sort(
    (a, b) => b.pendingBytes + b.socketBytes - (a.pendingBytes + a.socketBytes),
  );
  for (const conn of slowest) {
    if (outbound.queuedBytes + outbound.socketBytes <= outbound.maxMemoryBytes) return;
    cutBehind(outbound, conn);
  }
}

function cutBehind(outbound: Outbound, conn: Connection): void {
  if (!conn.done) {
    outbound.cut(conn);
    return;
  }
  // already closed for being behind: its socket still holds bytes nobody reads
  release(conn);
  conn.socket.terminate();
}
