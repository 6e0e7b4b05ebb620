/** How long a test waits for something by default before it fails. */
export const defaultDeadlineMs = 5_000;

const pollIntervalMs = 10;

/**
 * Polls `check` until it returns a value other than `undefined` or `false`, and resolves with
 * that value; fails with "<what> not reached within <n> ms" after the deadline. The one polling
 * helper of the tests: for state that changes without an event to wait on.
 */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what = 'condition',
  deadlineMs = defaultDeadlineMs,
): Promise<Exclude<T, undefined | false>> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as Exclude<T, undefined | false>;
    if (Date.now() > until) throw new Error(`${what} not reached within ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
  }
}

/** `promise`, or a rejection with `message` if it has not settled within `deadlineMs`. */
export async function withDeadline<T>(
  promise: Promise<T>,
  deadlineMs: number,
  message: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), deadlineMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A signal for event-driven waits: `wake()` on every event (a frame, a line, an exit), and a
 * waiter re-checks its condition after `next(ms)` resolves, on the next event or after `ms`.
 */
export interface Wakeup {
  wake(): void;
  next(ms: number): Promise<void>;
}

export function createWakeup(): Wakeup {
  let waiters: Array<() => void> = [];
  return {
    wake() {
      const woken = waiters;
      waiters = [];
      for (const resolve of woken) resolve();
    },
    next(ms) {
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, ms));
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
