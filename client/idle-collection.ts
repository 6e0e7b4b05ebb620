import { performance } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection when a process that worked hard goes quiet.
 *
 * V8 collects when the program allocates. A `sync` that has just taken 10,000 files allocates
 * almost nothing once it is idle, so the garbage of the transfer (about 70 MiB of a 180 MiB heap
 * after 10,000 files) stays, and the resident memory with it, until the next burst of work:
 * for hours on a machine that is otherwise idle. So every few seconds this looks at the event
 * loop's utilization and the heap: when the loop was nearly idle over the last period and the
 * heap grew by `growthBytes` since the last collection, it collects once. The check is two
 * counters read from V8; the collection pauses the process (some 100 ms for a heap of 200 MiB),
 * which only happens when nothing was waiting.
 */
export interface IdleCollectionOptions {
  /** How often the loop and the heap are looked at (5 s). */
  everyMs?: number;
  /** The heap's growth since the last collection that makes one worth it (32 MiB). */
  growthBytes?: number;
  /** The event loop's utilization over a period below which the process counts as idle (2 %). */
  idleBelow?: number;
  /** Told the bytes of heap before and after each collection (for a debug line). */
  onCollect?: (before: number, after: number) => void;
}

/**
 * Node's full collection, or undefined where it cannot be had. Without `--expose-gc` on the
 * command line the flag is set for a moment and `gc` taken from a fresh context made meanwhile
 * (the way Jest's leak detector does it), then the flag is set back: nothing else sees `gc`.
 */
export function fullCollection(): (() => void) | undefined {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    setFlagsFromString('--no-expose-gc');
    return typeof gc === 'function' ? (gc as () => void) : undefined;
  } catch {
    return undefined;
  }
}

/** Starts the checks (their timer does not hold the process); `stop` ends them. */
export function collectWhenIdle(options: IdleCollectionOptions = {}): { stop(): void } {
  const collect = fullCollection();
  if (collect === undefined) return { stop() {} };
  const { everyMs = 5_000, growthBytes = 32 * 1_048_576, idleBelow = 0.02 } = options;
  let since = getHeapStatistics().used_heap_size;
  let loop = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const period = performance.eventLoopUtilization(loop);
    loop = performance.eventLoopUtilization();
    const used = getHeapStatistics().used_heap_size;
    // The heap shrank by itself (V8 collected): growth counts from there.
    if (used < since) since = used;
    if (period.utilization >= idleBelow || used - since < growthBytes) return;
    collect();
    since = getHeapStatistics().used_heap_size;
    options.onCollect?.(used, since);
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
