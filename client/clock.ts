/**
 * Time as a relay connection sees it: a monotonic reading and one-shot timers. The default is
 * the system's; a test passes a clock it moves by hand, so that timeouts fire when it says.
 */
export interface Clock {
  /** Milliseconds on a monotonic scale (only differences matter). */
  now(): number;
  /** Runs `callback` once, `ms` from now; returns a function that cancels it. */
  after(ms: number, callback: () => void): () => void;
}

/** `performance.now()` and `setTimeout`, available in browsers and Node alike. */
export const systemClock: Clock = {
  now: () => globalThis.performance.now(),
  after(ms, callback) {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};

/** One-shot timers by name on a clock: setting a name again replaces its timer. */
export class NamedTimers<Name extends string> {
  private readonly cancels: Partial<Record<Name, () => void>> = {};

  constructor(private readonly clock: Clock) {}

  /** Runs `callback` once, `ms` from now, unless `clear(name)` comes first. */
  set(name: Name, ms: number, callback: () => void): void {
    this.clear(name);
    this.cancels[name] = this.clock.after(ms, () => {
      delete this.cancels[name];
      callback();
    });
  }

  clear(name: Name): void {
    this.cancels[name]?.();
    delete this.cancels[name];
  }

  clearAll(): void {
    for (const name of Object.keys(this.cancels) as Name[]) this.clear(name);
  }
}
