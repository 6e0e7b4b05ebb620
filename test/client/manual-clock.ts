import type { Clock } from '../../client/clock.ts';

interface Scheduled {
  at: number;
  order: number;
  callback: () => void;
}

/**
 * A clock for the relay connection that stands still until the test moves it: `advance(ms)`
 * runs every timer that falls due on the way, in time order (ties in the order they were set),
 * each seeing `now()` at its own due time.
 */
export class ManualClock implements Clock {
  private at = 0;
  private count = 0;
  private scheduled: Scheduled[] = [];

  now = (): number => this.at;

  after(ms: number, callback: () => void): () => void {
    const entry = { at: this.at + Math.max(0, ms), order: this.count++, callback };
    this.scheduled.push(entry);
    return () => {
      this.scheduled = this.scheduled.filter((other) => other !== entry);
    };
  }

  /** Timers set and not yet run or cancelled. */
  get pending(): number {
    return this.scheduled.length;
  }

  /** Moves time forward by `ms`, running what falls due (timers set meanwhile included). */
  advance(ms: number): void {
    const until = this.at + ms;
    for (;;) {
      const due = this.scheduled
        .filter((entry) => entry.at <= until)
        .sort((a, b) => a.at - b.at || a.order - b.order)[0];
      if (due === undefined) break;
      this.scheduled = this.scheduled.filter((entry) => entry !== due);
      this.at = due.at;
      due.callback();
    }
    this.at = until;
  }
}
