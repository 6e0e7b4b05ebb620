import { performance } from 'node:perf_hooks';

/** A token bucket: `burst` frames at once, refilled at `perSecond` frames per second. */
export interface TokenBucket {
  /** Takes one token; false when the bucket is empty (the frame is to be dropped). */
  take(): boolean;
}

let turnMs: number | undefined;
function endTurn(): void {
  turnMs = undefined;
}

/**
 * Monotonic milliseconds, read once per event-loop turn: a busy turn handles hundreds of frames
 * and the clock call was a tenth of the relay's own work per frame. Within one turn the value
 * stands still, so a long turn refills buckets late, never early (never more permissive).
 */
export function turnClockMs(): number {
  if (turnMs === undefined) {
    turnMs = performance.now();
    setImmediate(endTurn);
  }
  return turnMs;
}

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
  clock: () => number = turnClockMs,
): TokenBucket {
  return new Bucket(perSecond, burst, clock);
}
