/** How many new files, and how many bytes of them, a folder accepts from other devices per minute. */
export interface ReceiveLimits {
  filesPerMinute: number;
  bytesPerMinute: number;
}

/**
 * Above what a first sync of a large library reaches on a LAN (20,000 small files written in
 * about 15 s here, 80,000 a minute; a gigabit link carries about 6.6 GiB a minute), so that such
 * a sync is never held; a device that makes files faster than that is paced and named in a line.
 */
export const defaultReceiveLimits: ReceiveLimits = {
  filesPerMinute: 100_000,
  bytesPerMinute: 8 * 1_073_741_824,
};

const windowMs = 60_000;

/**
 * What was accepted in the last minute (a sliding window): a new file from another device is
 * taken while the files and bytes of the last 60 s stay within the limits. A file larger than a
 * whole minute's bytes goes alone, when nothing else was taken in the last minute.
 */
/** How often files held back by the limits are tried again. */
const heldRetryMs = 5_000;

export class ReceiveBudget {
  private readonly limits: ReceiveLimits;
  private readonly taken: { at: number; bytes: number }[] = [];
  private bytes = 0;
  private holding = false;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    limits: ReceiveLimits | undefined,
    private readonly now: () => number,
  ) {
    this.limits = limits ?? defaultReceiveLimits;
  }

  take(size: number): boolean {
    const now = this.now();
    this.forgetOld(now);
    const { filesPerMinute, bytesPerMinute } = this.limits;
    if (this.taken.length + 1 > filesPerMinute) return false;
    if (this.bytes + size > bytesPerMinute && this.taken.length > 0) return false;
    this.taken.push({ at: now, bytes: size });
    this.bytes += size;
    return true;
  }

  /** New files that may still be taken now, by their count alone (bytes not looked at). */
  filesLeft(): number {
    this.forgetOld(this.now());
    return Math.max(0, this.limits.filesPerMinute - this.taken.length);
  }

  /** What was taken more than a minute ago no longer counts. */
  private forgetOld(now: number): void {
    while (this.taken.length > 0 && this.taken[0]!.at <= now - windowMs) {
      this.bytes -= this.taken.shift()!.bytes;
    }
  }

  describe(): string {
    const { filesPerMinute, bytesPerMinute } = this.limits;
    return `more than ${filesPerMinute} files or ${Math.round(bytesPerMinute / 1_048_576)} MiB a minute`;
  }

  /**
   * After a batch of writes, with the number of new files it held back: a line when holding
   * starts and one when it ends; while it lasts, `retry` runs every 5 s.
   */
  hold(count: number, say: (kind: 'out' | 'problem', line: string) => void, retry: () => void) {
    if (count === 0) {
      if (this.holding) say('out', 'every held file is written');
      this.holding = false;
      return;
    }
    if (!this.holding) {
      say(
        'problem',
        `holding ${count} new file(s) from other devices: ${this.describe()}; they follow as the limit allows`,
      );
    }
    this.holding = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(retry, heldRetryMs);
  }

  /** Stops the retries. */
  close(): void {
    clearTimeout(this.retryTimer);
  }
}
