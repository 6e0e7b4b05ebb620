/** Reconnect delays: exponential growth, capped, with random jitter. */
export interface BackoffOptions {
  /** Delay before the first retry, in ms. Default 250. */
  initialDelayMs?: number;
  /** Upper bound of a delay, in ms. Default 10_000. */
  maxDelayMs?: number;
  /** Growth per attempt. Default 2. */
  factor?: number;
  /**
   * Share of each delay that is random, 0..1. Default 0.5: a delay is between half and all of
   * the exponential value, so that clients cut by the same outage do not retry in lockstep.
   */
  jitter?: number;
  /** Source of randomness in [0, 1); injectable for tests. Default Math.random. */
  random?: () => number;
}

export interface Backoff {
  /** The delay before the next attempt, in ms; each call counts one attempt. */
  next(): number;
  /** Back to the initial delay (after a successful connection). */
  reset(): void;
  /** Attempts since the last reset. */
  readonly attempts: number;
}

export function createBackoff(options: BackoffOptions = {}): Backoff {
  const initialDelayMs = options.initialDelayMs ?? 250;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const factor = options.factor ?? 2;
  const jitter = options.jitter ?? 0.5;
  const random = options.random ?? Math.random;
  if (!(initialDelayMs >= 0) || !(maxDelayMs >= initialDelayMs)) {
    throw new RangeError('backoff: need 0 <= initialDelayMs <= maxDelayMs');
  }
  if (!(factor >= 1)) throw new RangeError('backoff: factor must be at least 1');
  if (!(jitter >= 0 && jitter <= 1)) throw new RangeError('backoff: jitter must be within 0..1');
  let attempts = 0;
  return {
    get attempts() {
      return attempts;
    },
    next() {
      const exponential = Math.min(maxDelayMs, initialDelayMs * factor ** attempts);
      attempts++;
      return Math.round(exponential * (1 - jitter * random()));
    },
    reset() {
      attempts = 0;
    },
  };
}
