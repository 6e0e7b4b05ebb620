import type { BoundScope, FrameStore } from './buffer-frames.ts';
import type { AbsentDevice, BufferEvents } from './buffer-types.ts';

/** One queued write of the buffer. */
export type Op =
  | { kind: 'message'; entries: AbsentDevice[]; frame: string; bytes: number }
  | { kind: 'absent'; entry: AbsentDevice }
  | { kind: 'expire'; room: string; device: string; at: number }
  | { kind: 'forget'; room: string; device: string }
  | { kind: 'forgetDevice'; device: string }
  | { kind: 'revoke'; device: string; revokedAt: number };

/**
 * The buffer's writes: queued and committed in one transaction per turn of the event loop. A
 * failed write marks the buffer unhealthy until one succeeds; a rolled-back batch loses its
 * frames (counted, `gap` for their devices) and what else it held is tried again at once.
 */
export class WriteQueue {
  readonly #commit: (ops: Op[]) => void;
  readonly #frames: FrameStore;
  readonly #events: BufferEvents;
  #queue: Op[] = [];
  #pendingFrames = 0;
  #flushScheduled = false;
  #closed = false;
  /** The last write failed; cleared by the next one that succeeds. */
  #failed = false;
  /** Frames lost to a bound in the transaction under way, reported once it commits. */
  readonly #lostInTransaction = { user: 0, buffer: 0 };
  readonly #flushSoon = () => this.flush();

  /** `commit` runs a batch in one transaction (and throws when it rolled back). */
  constructor(commit: (ops: Op[]) => void, frames: FrameStore, events: BufferEvents) {
    this.#commit = commit;
    this.#frames = frames;
    this.#events = events;
  }

  /** References queued for the next commit. */
  get pending(): number {
    return this.#pendingFrames;
  }

  /** The last write failed. */
  get failed(): boolean {
    return this.#failed;
  }

  /** A write outside the queue (the health probe) succeeded after failures. */
  recovered(): void {
    this.#failed = false;
    this.#events.recovered();
  }

  /** A frame was lost to a bound in the transaction under way. */
  lostToBound(scope: BoundScope): void {
    this.#lostInTransaction[scope]++;
  }

  push(op: Op): void {
    if (this.#closed) return;
    if (op.kind === 'message') this.#pendingFrames += op.entries.length;
    this.#queue.push(op);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flushSoon);
    }
  }

  /** Commits the queue now. */
  flush(): void {
    this.#flushScheduled = false;
    if (this.#queue.length === 0 || this.#closed) return;
    const ops = this.#queue;
    this.#queue = [];
    this.#pendingFrames = 0;
    // The relay keeps routing live traffic; a failed batch is counted and reported.
    const err = this.#write(ops);
    if (err !== undefined) this.#recoverFrom(err, ops);
  }

  /** Nothing is queued or committed from now on. */
  close(): void {
    this.#closed = true;
  }

  /** Runs a write transaction; a failure marks the buffer unhealthy until a write succeeds. */
  #write(ops: Op[]): unknown {
    this.#lostInTransaction.user = 0;
    this.#lostInTransaction.buffer = 0;
    try {
      this.#commit(ops);
    } catch (err: unknown) {
      if ((err as { committedInMemory?: boolean }).committedInMemory === true) {
        // sql.js: applied in memory, written to the file with the next write that succeeds.
        this.#reportBound();
        this.#markFailed(err, 0);
        return undefined;
      }
      return err;
    }
    this.#reportBound();
    this.#events.flushed();
    if (this.#failed) this.recovered();
    return undefined;
  }

  #reportBound(): void {
    const lost = this.#lostInTransaction;
    if (lost.user > 0) this.#events.droppedBound('user', lost.user);
    if (lost.buffer > 0) this.#events.droppedBound('buffer', lost.buffer);
  }

  #markFailed(err: unknown, lost: number): void {
    this.#failed = true;
    this.#events.failed(err, lost);
  }

  /**
   * A rolled-back batch: its frames are lost (counted, `gap` for their devices); what else it
   * held (absent marks, expiries, revocations) is tried again at once.
   */
  #recoverFrom(err: unknown, ops: Op[]): void {
    const frames = this.#frames;
    let lost = 0;
    const touched = new Set<AbsentDevice>();
    for (const op of ops) {
      if (op.kind !== 'message') continue;
      for (const entry of op.entries) {
        lost++;
        entry.gap = true;
        touched.add(entry);
      }
    }
    frames.load();
    for (const entry of touched) {
      const kept = frames.referencesOf(entry.room, entry.device);
      entry.messages = kept.length;
      entry.bytes = kept.reduce((sum, row) => sum + row.bytes, 0);
    }
    this.#markFailed(err, lost);
    const rest: Op[] = ops.filter((op) => op.kind !== 'message');
    for (const entry of touched) rest.push({ kind: 'absent', entry });
    if (rest.length > 0 && this.#write(rest) !== undefined) frames.load();
  }
}
