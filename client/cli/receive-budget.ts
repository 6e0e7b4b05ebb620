/** How many new files, and how many bytes of them, a folder accepts from other devices per minute. */
export interface ReceiveLimits {
  filesPerMinute: number;
  bytesPerMinute: number;
}

export const defaultReceiveLimits: ReceiveLimits = {
  filesPerMinute: 5_000,
  bytesPerMinute: 512 * 1_048_576,
};

/**
 * Two token buckets that refill evenly over a minute: one of files, one of bytes. A new file
 * from another device takes one file and its size; a file larger than a whole minute's bytes
 * goes when the bucket is full.
 */
export class ReceiveBudget {
  private readonly limits: ReceiveLimits;
  private files: number;
  private bytes: number;
  private last: number;

  constructor(
    limits: ReceiveLimits | undefined,
    private readonly now: () => number,
  ) {
    this.limits = limits ?? defaultReceiveLimits;
    this.files = this.limits.filesPerMinute;
    this.bytes = this.limits.bytesPerMinute;
    this.last = now();
  }

  take(size: number): boolean {
    const now = this.now();
    const share = Math.max(0, now - this.last) / 60_000;
    this.last = now;
    const { filesPerMinute, bytesPerMinute } = this.limits;
    this.files = Math.min(filesPerMinute, this.files + share * filesPerMinute);
    this.bytes = Math.min(bytesPerMinute, this.bytes + share * bytesPerMinute);
    const full = this.bytes >= bytesPerMinute;
    if (this.files < 1 || (this.bytes < size && !full)) return false;
    this.files -= 1;
    this.bytes -= size;
    return true;
  }

  describe(): string {
    const { filesPerMinute, bytesPerMinute } = this.limits;
    return `more than ${filesPerMinute} files or ${Math.round(bytesPerMinute / 1_048_576)} MiB a minute`;
  }
}
