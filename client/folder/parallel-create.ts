import { Worker } from 'node:worker_threads';

/**
 * Creates many new files at once from a few threads, and waits for them: the temporary files
 * of a batch of writes. On a busy disk one create costs up to a millisecond, most of it
 * waiting on the file system's journal, and creates overlap when several threads make them;
 * the folder sync's writes are synchronous on its one thread, so a batch of 10,000 new files
 * spent most of its time creating them one by one.
 *
 * Each thread opens its share of the names as `open(name, O_WRONLY | O_CREAT | O_EXCL, mode)`
 * (a name taken, a link included, fails) and reports the descriptor in shared memory; the
 * calling thread waits on it (`Atomics.wait`) and then owns the descriptors (they belong to
 * the process). A name that could not be created gets none: the caller creates it its own way
 * and says why when that fails too. After `waitMs` without an answer the rest is cancelled:
 * a thread checks the cancel flag before each create.
 */

/** The worker's code: run as given (`eval`), so that it needs no file of its own in a build. */
const workerSource = `
const { parentPort } = require('node:worker_threads');
const { openSync, constants } = require('node:fs');
const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
parentPort.on('message', ({ shared, start, names, mode }) => {
  const slots = new Int32Array(shared);
  const done = slots.length - 2;
  const cancel = slots.length - 1;
  for (let i = 0; i < names.length; i++) {
    let fd = -1;
    if (Atomics.load(slots, cancel) === 0) {
      try {
        fd = openSync(names[i], flags, mode);
      } catch {}
    }
    Atomics.store(slots, start + i, fd);
  }
  Atomics.add(slots, done, names.length);
  Atomics.notify(slots, done);
});
`;

export class ParallelCreate {
  readonly #threads: number;
  readonly #waitMs: number;
  #workers: Worker[] | undefined;

  constructor(threads = 4, waitMs = 30_000) {
    this.#threads = threads;
    this.#waitMs = waitMs;
  }

  /**
   * Creates every name of `names` (absolute paths) as a new empty file of `mode`; the
   * descriptor of each, open for writing, or undefined when it was not created.
   */
  createAll(names: string[], mode: number): (number | undefined)[] {
    if (names.length === 0) return [];
    const workers = this.#start();
    const shared = new SharedArrayBuffer(4 * (names.length + 2));
    const slots = new Int32Array(shared);
    const done = names.length;
    const cancel = names.length + 1;
    // not reported yet: -2 (a create that failed reports -1)
    slots.fill(-2, 0, names.length);
    const share = Math.ceil(names.length / workers.length);
    for (let w = 0, start = 0; start < names.length; w += 1, start += share) {
      workers[w]!.postMessage({ shared, start, names: names.slice(start, start + share), mode });
    }
    const until = Date.now() + this.#waitMs;
    for (;;) {
      const seen = Atomics.load(slots, done);
      if (seen >= names.length) break;
      const left = until - Date.now();
      if (left <= 0 || Atomics.wait(slots, done, seen, left) === 'timed-out') {
        // Given up: what is not created yet is not created at all.
        Atomics.store(slots, cancel, 1);
        break;
      }
    }
    return Array.from(slots.subarray(0, names.length), (_, i) => {
      const fd = Atomics.load(slots, i);
      return fd >= 0 ? fd : undefined;
    });
  }

  /** Stops the threads (the next `createAll` starts them again). */
  close(): void {
    for (const worker of this.#workers ?? []) void worker.terminate();
    this.#workers = undefined;
  }

  #start(): Worker[] {
    if (this.#workers !== undefined) return this.#workers;
    this.#workers = Array.from({ length: this.#threads }, () => {
      const worker = new Worker(workerSource, { eval: true });
      // Idle threads never keep the process alive.
      worker.unref();
      return worker;
    });
    return this.#workers;
  }
}
