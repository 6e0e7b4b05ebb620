import { performance } from 'node:perf_hooks';

/** A token bucket: `burst` frames at once, refilled at `perSecond` frames per second. */
export interface TokenBucket {
  /** Takes one token; false when the bucket is empty (the frame is to be dropped). */
  take(): boolean;
}

const monotonicMs = () => performance.now();

/** Plain fields and a shared method: one small object per connection, no closures. */
class Bucket implements TokenBucket {
  tokens: number;
  refilledAt: number;
  readonly burst: number;
  readonly perMs: number;
  readonly clock: () => number;

  constructor(perSecond: number, burst: number, clock: () => number) {
    this.tokens = burst;
    this.burst = burst;
    this.perMs = perSecond / 1000;
    this.clock = clock;
    this.refilledAt = clock();
  }

  take(): boolean {
    const now = this.clock();
    if (this.tokens < this.burst) {
      this.tokens = Math.min(this.burst, this.tokens + (now - this.refilledAt) * this.perMs);
    }
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** Creates a full bucket. `clock` returns milliseconds on a monotonic scale. */
export function createTokenBucket(
  perSecond: number,
  burst: number,
  clock: () => number = monotonicMs,
): TokenBucket {
  return new Bucket(perSecond, burst, clock);
}
