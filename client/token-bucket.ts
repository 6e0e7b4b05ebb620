/**
 * Paces outgoing frames under the relay's per-connection rate limit: `burst` frames at once,
 * refilled at `perSecond` frames per second. It starts full and keeps its level across
 * reconnects (the relay's limit is per connection, but a reconnect storm should not burst).
 */
export class TokenBucket {
  private tokens: number;
  private refilledAt: number;
  private readonly perSecond: number;
  private readonly burst: number;
  private readonly now: () => number;

  /** `now` returns milliseconds on a monotonic scale. */
  constructor(perSecond: number, burst: number, now: () => number) {
    this.perSecond = perSecond;
    this.burst = burst;
    this.now = now;
    this.tokens = burst;
    this.refilledAt = now();
  }

  /** Takes one token for a frame; false when the bucket is empty (the frame has to wait). */
  take(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  /** Frames go at the rate: less than half the burst is left. */
  atRate(): boolean {
    this.refill();
    return this.tokens < this.burst / 2;
  }

  /** Milliseconds until the next token is there (at least 1, so a retry timer always waits). */
  waitMs(): number {
    this.refill();
    return Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.perSecond));
  }

  private refill(): void {
    const now = this.now();
    this.tokens = Math.min(
      this.burst,
      this.tokens + ((now - this.refilledAt) * this.perSecond) / 1000,
    );
    this.refilledAt = now;
  }
}
