import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/**
 * What the relay writes to its receivers, and the bounds on what it holds unsent.
 *
 * Frames are handed to a receiver's socket at once while the socket keeps up; its writes are
 * corked until the end of the event-loop turn so that one turn's frames leave in one `writev`.
 * When the kernel does not take a receiver's bytes (it stopped reading), the frames that follow
 * wait in the connection's own queue and are handed over on the socket's `drain`, a slice at a
 * time: the socket's write buffer stays small, and every frame still queued is known, so a
 * receiver closed for slowness (1013) or that drops has them kept for it (buffered) instead of
 * losing them. A receiver's unsent bytes are its queue plus its socket's write buffer; past
 * `maxQueuedBytes` for one receiver, or `maxMemoryBytes` for the whole relay, the receivers with
 * the most unsent bytes are closed at the end of the turn. What the relay holds in memory for a
 * receiver before it becomes a frame (a catch-up's entries read and its page waiting for room,
 * `setHeld`) counts in the relay's total like unsent bytes, and with them when the receivers
 * with the most are chosen; it waits for the receiver's room, so it never counts against the
 * receiver's own bound.
 *
 * Each relay has one `Writer` (its bounds, its corked sockets, its turn's end); each connection
 * has one `SendQueue`. Both are written by this module alone: the rest of the relay calls their
 * methods.
 */

const textFrame = { binary: false } as const;
const binaryFrame = { binary: true } as const;

/**
 * Above this many bytes in one receiver's corked write buffer, they are written out before the
 * end of the turn: a receiver that does not take them is behind from then on.
 */
const flushAtBytes = 1024 * 1024;
/** On `drain`, frames are handed from the queue to the socket until its buffer holds this much. */
const drainSliceBytes = 256 * 1024;
/**
 * Above this many frames held in one event-loop turn everything is flushed at once: with
 * thousands of busy connections a single turn can read megabytes, and holding every reply
 * until its end costs more (memory, GC) than the system calls it saves.
 */
const maxCorkedFrames = 8192;

/** One relay's writer: the bounds on unsent frames shared by its connections (`Owner`s). */
export class Writer<Owner> {
  /** `relay.maxQueuedBytes`: unsent bytes one receiver may have. */
  readonly maxQueuedBytes: number;
  /** `relay.maxMemoryBytes`: unsent bytes of every receiver together. */
  readonly maxMemoryBytes: number;
  /** Bytes in the queues of the connections that are behind (kept by their SendQueue). */
  queuedBytes = 0;
  /** Bytes in the write buffers of the sockets of connections behind, as last seen. */
  socketBytes = 0;
  /** Bytes held for receivers before they become frames (see `SendQueue.setHeld`). */
  heldBytes = 0;
  /** Connections whose socket did not take everything. */
  readonly behind = new Set<SendQueue<Owner>>();
  /** Connections with bytes held for them. */
  readonly holding = new Set<SendQueue<Owner>>();
  /** Closes a receiver past a bound (1013) and keeps its queued frames for it. */
  readonly #cut: (owner: Owner) => void;
  #corked: SendQueue<Owner>[] = [];
  /** Frames written to corked streams since the last flush. */
  #corkedFrames = 0;
  /** A receiver is past a bound: checked at the end of the turn. */
  #over = false;
  #turnEndScheduled = false;
  readonly #turnEnd = (): void => this.#endTurn();
  /** What waits for this turn's frames to be handed to their sockets (`afterWrites`). */
  #afterWrites: (() => void)[] = [];

  constructor(maxQueuedBytes: number, maxMemoryBytes: number, cut: (owner: Owner) => void) {
    this.maxQueuedBytes = maxQueuedBytes;
    this.maxMemoryBytes = maxMemoryBytes;
    this.#cut = cut;
  }

  /** Unsent bytes of every receiver: queues, socket write buffers and bytes held for them. */
  get unsentBytes(): number {
    return this.queuedBytes + this.socketBytes + this.heldBytes;
  }

  /**
   * Holds a receiver's writes until the end of this event-loop turn, so that every frame routed
   * to it while the relay handles one batch of input leaves in one `writev` instead of one
   * system call per frame (the dominant cost of a small message otherwise).
   */
  cork(queue: SendQueue<Owner>): void {
    if (queue.stream.writableCorked > 0) return;
    queue.stream.cork();
    this.#corked.push(queue);
    this.#scheduleTurnEnd();
  }

  /**
   * Runs `send` once every frame written in this turn was handed to its socket, and what this
   * turn gave the buffer was committed (its write is this turn's `setImmediate` too), so that a
   * `pong` never leaves before the deliveries it confirms: a relay killed between the two writes
   * would otherwise have confirmed a message that never reached its receiver.
   */
  afterWrites(send: () => void): void {
    this.#afterWrites.push(send);
    this.#scheduleTurnEnd();
  }

  /** One frame was written to a corked stream; past `maxCorkedFrames` everything is written out. */
  wrote(): void {
    if (++this.#corkedFrames < maxCorkedFrames) return;
    this.#corkedFrames = 0;
    for (const queue of this.#corked) {
      queue.stream.uncork();
      queue.stream.cork();
    }
  }

  /** A receiver may be past a bound: checked at the end of the turn. */
  checkBounds(queue: SendQueue<Owner>): void {
    if (queue.pastOwnBound || this.unsentBytes > this.maxMemoryBytes) {
      this.#over = true;
      this.#scheduleTurnEnd();
    }
  }

  #scheduleTurnEnd(): void {
    if (this.#turnEndScheduled) return;
    this.#turnEndScheduled = true;
    setImmediate(this.#turnEnd);
  }

  /**
   * The end of the turn: writes out every corked socket (a socket that does not take its bytes
   * is behind from now on), then closes the receivers past a bound.
   */
  #endTurn(): void {
    this.#turnEndScheduled = false;
    const queues = this.#corked;
    this.#corked = [];
    this.#corkedFrames = 0;
    for (const queue of queues) queue.uncorked();
    // Written at the next turn end: after the buffer's commit of this turn, too.
    const after = this.#afterWrites;
    this.#afterWrites = [];
    for (const send of after) send();
    if (!this.#over) return;
    this.#over = false;
    this.#enforce();
  }

  /**
   * Closes the receivers past a bound: each one past `maxQueuedBytes`, then, while the relay is
   * past `maxMemoryBytes`, the ones with the most unsent bytes first.
   */
  #enforce(): void {
    for (const queue of [...this.behind]) {
      if (queue.pastOwnBound) this.#cutBehind(queue);
    }
    if (this.unsentBytes <= this.maxMemoryBytes) return;
    const slowest = [...new Set([...this.behind, ...this.holding])];
    slowest.sort((a, b) => b.counted - a.counted);
    for (const queue of slowest) {
      if (this.unsentBytes <= this.maxMemoryBytes) return;
      this.#cutBehind(queue);
    }
  }

  #cutBehind(queue: SendQueue<Owner>): void {
    if (!queue.done) {
      this.#cut(queue.owner);
      // what was held for it is not sent any more: the relay's total loses it now
      queue.setHeld(0);
      return;
    }
    // already closed for being behind: its socket still holds bytes nobody reads
    queue.release();
    queue.socket.terminate();
  }
}

/**
 * A frame a connection had queued and never written: what its device would have received next,
 * with the frame's position in the room's stream when the broker gave one (a cluster broker's
 * stream sequence), so the broker can replay it from there instead of keeping it again.
 */
export interface UnsentFrame {
  readonly frame: Buffer;
  readonly position: number | undefined;
}

/** The position of a queued frame that has none. */
const noPosition = -1;
/**
 * The position of a queued binary frame (a `chunk` answer): it answers a request of this
 * connection alone, so it is never handed back by `takeUnsent` to be kept for the device.
 */
const binaryPosition = -2;

/** One connection's frames on their way to its socket (see the module's comment). */
export class SendQueue<Owner> {
  readonly owner: Owner;
  readonly socket: WebSocket;
  /** The TCP stream under `socket`, corked while a batch of frames is written to it. */
  readonly stream: Duplex;
  readonly writer: Writer<Owner>;
  /**
   * Frames waiting for the socket to drain (from `#head` on), while the socket does not take
   * what it is given; undefined while it keeps up.
   */
  #frames: Buffer[] | undefined = undefined;
  /** The position of each frame in `#frames` (`noPosition` for none), index for index. */
  #positions: number[] = [];
  #head = 0;
  /** Bytes in `#frames` from `#head` on. */
  #bytes = 0;
  /** The socket's write-buffer bytes as last counted in the writer's `socketBytes`. */
  #socketBytes = 0;
  /** Bytes held for this receiver before they become frames (`setHeld`). */
  #held = 0;
  /** Unsent bytes allowed beyond `relay.maxQueuedBytes` while a join's replay is written out. */
  #allowance = 0;
  #done = false;

  constructor(owner: Owner, socket: WebSocket, stream: Duplex, writer: Writer<Owner>) {
    this.owner = owner;
    this.socket = socket;
    this.stream = stream;
    this.writer = writer;
  }

  /** Replaced, revoked or closing: nothing more is queued, and its input is ignored. */
  get done(): boolean {
    return this.#done;
  }

  /** The connection is ending: nothing more is queued for it. */
  end(): void {
    this.#done = true;
  }

  /** The socket does not take what it is given: frames wait in the queue. */
  get isBehind(): boolean {
    return this.#frames !== undefined;
  }

  /**
   * Unsent bytes as the writer counts them: the queue and the socket's buffer when last seen,
   * and what is held for the receiver.
   */
  get counted(): number {
    return this.#bytes + this.#socketBytes + this.#held;
  }

  /** Past `relay.maxQueuedBytes` (and the replay's allowance); held bytes wait for room. */
  get pastOwnBound(): boolean {
    return this.#bytes + this.#socketBytes > this.writer.maxQueuedBytes + this.#allowance;
  }

  /**
   * Bytes the relay holds for this receiver before they become frames (a catch-up's entries
   * read from the store and its page waiting for room): counted in the relay's total from now
   * on, in place of what was held before. 0 when nothing is held any more; nothing counts once
   * the connection is ending.
   */
  setHeld(held: number): void {
    const { writer } = this;
    const bytes = this.#done ? 0 : held;
    writer.heldBytes += bytes - this.#held;
    this.#held = bytes;
    if (bytes === 0) {
      writer.holding.delete(this);
      return;
    }
    writer.holding.add(this);
    writer.checkBounds(this);
  }

  /** The unsent bytes of the receiver: its queue and its socket's write buffer. */
  get unsentBytes(): number {
    return this.#bytes + this.stream.writableLength;
  }

  /**
   * A join's replay may exceed `relay.maxQueuedBytes` on its own: `bytes` more are allowed
   * until the queue is written out.
   */
  allowReplay(bytes: number): void {
    this.#allowance += bytes;
  }

  /**
   * Sends an already serialized text frame; the same Buffer is shared by every receiver.
   * `position`: its place in the room's stream, when the broker gave one (see `UnsentFrame`).
   */
  send(data: Buffer, position?: number): void {
    this.#send(data, position ?? noPosition);
  }

  /**
   * Sends a binary frame (a `chunk` answer in the binary form), within the same bounds as the
   * text frames; never kept for the device if it is still queued when the connection ends.
   */
  sendBinary(data: Buffer): void {
    this.#send(data, binaryPosition);
  }

  #send(data: Buffer, position: number): void {
    if (this.#frames !== undefined) {
      this.#enqueue(data, position);
      return;
    }
    const { socket, stream } = this;
    if (socket.readyState !== socket.OPEN) return;
    this.writer.cork(this);
    socket.send(data, position === binaryPosition ? binaryFrame : textFrame);
    if (stream.writableLength > flushAtBytes) {
      stream.uncork();
      stream.cork();
      this.#checkBehind();
    }
    this.writer.wrote();
  }

  /**
   * Takes the frames still queued (never handed to the socket), in order: what a receiver that
   * is closed or dropped would have received next. Its socket's buffer stays counted until the
   * socket closes (`release`).
   */
  takeUnsent(): UnsentFrame[] {
    const frames = this.#frames;
    if (frames === undefined || this.#head >= frames.length) return [];
    const unsent: UnsentFrame[] = [];
    for (let i = this.#head; i < frames.length; i++) {
      const position = this.#positions[i] ?? noPosition;
      if (position === binaryPosition) continue;
      unsent.push({
        frame: frames[i] as Buffer,
        position: position === noPosition ? undefined : position,
      });
    }
    this.#frames = [];
    this.#positions = [];
    this.#head = 0;
    this.writer.queuedBytes -= this.#bytes;
    this.#bytes = 0;
    return unsent;
  }

  /** Stops counting the connection (caught up, or its socket closed). */
  release(): void {
    const { writer } = this;
    if (!writer.behind.delete(this)) return;
    writer.queuedBytes -= this.#bytes;
    writer.socketBytes -= this.#socketBytes;
    this.#bytes = 0;
    this.#socketBytes = 0;
  }

  /** The writer wrote out the turn's bytes: a socket that did not take them is behind. */
  uncorked(): void {
    this.stream.uncork();
    if (this.#frames === undefined) this.#checkBehind();
  }

  /**
   * After a write-out: a socket still holding bytes it asked to be drained of is behind; what
   * follows waits in the queue until `drain`.
   */
  #checkBehind(): void {
    const { stream, socket, writer } = this;
    if (!stream.writableNeedDrain || stream.writableLength === 0) return;
    if (socket.readyState !== socket.OPEN) return;
    this.#frames = [];
    this.#positions = [];
    this.#head = 0;
    this.#socketBytes = stream.writableLength;
    writer.socketBytes += this.#socketBytes;
    writer.behind.add(this);
    stream.once('drain', () => this.#drain());
    writer.checkBounds(this);
  }

  /** A frame for a receiver that is behind: into its queue. */
  #enqueue(data: Buffer, position: number): void {
    if (this.#done) return;
    (this.#frames as Buffer[]).push(data);
    this.#positions.push(position);
    this.#bytes += data.length;
    this.writer.queuedBytes += data.length;
    this.writer.checkBounds(this);
  }

  /** The socket took its buffer: hands it the next slice of the queue. */
  #drain(): void {
    const frames = this.#frames;
    if (frames === undefined) return;
    const { stream, socket, writer } = this;
    if (socket.readyState !== socket.OPEN) return;
    stream.cork();
    let head = this.#head;
    let handed = 0;
    while (head < frames.length && stream.writableLength < drainSliceBytes) {
      const data = frames[head] as Buffer;
      const binary = this.#positions[head] === binaryPosition;
      frames[head++] = undefined as unknown as Buffer;
      handed += data.length;
      socket.send(data, binary ? binaryFrame : textFrame);
    }
    stream.uncork();
    this.#bytes -= handed;
    writer.queuedBytes -= handed;
    writer.socketBytes += stream.writableLength - this.#socketBytes;
    this.#socketBytes = stream.writableLength;
    if (head < frames.length) {
      // drop what was handed over once it is most of the array
      if (head > 1024 && head * 2 > frames.length) {
        this.#frames = frames.slice(head);
        this.#positions = this.#positions.slice(head);
        head = 0;
      }
      this.#head = head;
      stream.once('drain', () => this.#drain());
      return;
    }
    this.#frames = [];
    this.#positions = [];
    this.#head = 0;
    if (stream.writableNeedDrain && stream.writableLength > 0) {
      stream.once('drain', () => this.#drain());
      return;
    }
    this.#allowance = 0;
    // no longer behind: frames go to the socket at once again
    this.#frames = undefined;
    this.release();
  }
}
