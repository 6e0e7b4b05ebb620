import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { collectWhenIdle, fullCollection } from '../../client/idle-collection.ts';
import { eventually } from '../helpers/wait.ts';

const mib = 1_048_576;

/** About `bytes` of objects that outlive the young collections, let go when the call returns. */
function burst(bytes: number): number {
  const kept: number[][] = [];
  for (let size = 0; size < bytes; size += 8 * 1_024) kept.push(new Array(1_024).fill(size));
  return kept.length;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('a full collection when the process goes quiet', () => {
  it('gets Node\u2019s full collection without --expose-gc, and it frees what nothing holds', async () => {
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    const collect = fullCollection();
    expect(collect).toBeTypeOf('function');
    const ref = (() => new WeakRef({ payload: new Array(10_000).fill(1) }))();
    // A WeakRef holds its target until the job that made it ends.
    await tick();
    collect!();
    expect(ref.deref()).toBeUndefined();
    // The flag is set back: code loaded later sees no `gc`.
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });

  it('collects the garbage of a burst of work once the loop is idle, and only then', async () => {
    const collections: { before: number; after: number }[] = [];
    const checks = collectWhenIdle({
      everyMs: 40,
      growthBytes: 16 * mib,
      onCollect: (before, after) => collections.push({ before, after }),
    });
    try {
      const atStart = getHeapStatistics().used_heap_size;
      expect(burst(64 * mib)).toBeGreaterThan(0);
      expect(getHeapStatistics().used_heap_size - atStart).toBeGreaterThan(16 * mib);
      // Busy for 400 ms (ten checks): the garbage stays.
      const busyUntil = performance.now() + 400;
      while (performance.now() < busyUntil) {
        const sliceEnd = performance.now() + 30;
        while (performance.now() < sliceEnd) Math.sqrt(sliceEnd);
        await tick();
      }
      expect(collections).toEqual([]);
      // Idle: one collection, which frees most of the burst.
      await eventually(() => collections.length > 0, 'a collection once idle', 5_000);
      expect(collections[0]!.before - collections[0]!.after).toBeGreaterThan(16 * mib);
      // Idle with no new garbage: no collection after it.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(collections).toHaveLength(1);
    } finally {
      checks.stop();
    }
  });
});
