import { performance } from 'node:perf_hooks';

/** A token bucket: `burst` frames at once, refilled at `perSecond` frames per second. */
export interface TokenBucket {
  /** Takes one token; false when the bucket is empty (the frame is to be dropped). */
  take(): boolean;
}

/** Creates a full bucket. `clock` returns milliseconds on a monotonic scale. */
export function createTokenBucket(
  perSecond: number,
  burst: number,
  clock: () => number = () => performance.now(),
): TokenBucket {
  let tokens = burst;
  let refilledAt = clock();
  const perMs = perSecond / 1000;
  return {
    take(): boolean {
      const now = clock();
      if (tokens < burst) tokens = Math.min(burst, tokens + (now - refilledAt) * perMs);
      refilledAt = now;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}
