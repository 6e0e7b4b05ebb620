/**
 * A bound on the bytes of the chunks being sent or fetched at once: `acquire` waits while the
 * window is full. One chunk larger than the whole window still goes, alone.
 */
export class ByteWindow {
  private used = 0;
  private waiters: Array<{ bytes: number; resolve: () => void }> = [];

  constructor(readonly limit: number) {}

  /** Takes `bytes` now if they fit (or the window is empty); false when they have to wait. */
  tryAcquire(bytes: number): boolean {
    if (this.waiters.length > 0 || !this.fits(bytes)) return false;
    this.used += bytes;
    return true;
  }

  /** Takes `bytes`, once they fit, in the order of the calls. */
  acquire(bytes: number): Promise<void> {
    if (this.tryAcquire(bytes)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ bytes, resolve }));
  }

  /** Gives back what an `acquire` took, and lets the waiting ones in. */
  release(bytes: number): void {
    this.used -= bytes;
    while (this.waiters.length > 0 && this.fits(this.waiters[0]!.bytes)) {
      const next = this.waiters.shift()!;
      this.used += next.bytes;
      next.resolve();
    }
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.limit;
  }
}
