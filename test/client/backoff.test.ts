import { describe, expect, it } from 'vitest';
import { createBackoff } from '../../client/backoff.ts';

describe('reconnect backoff', () => {
  it('doubles from the initial delay up to the cap', () => {
    const backoff = createBackoff({ initialDelayMs: 100, maxDelayMs: 1_000, jitter: 0 });
    expect(Array.from({ length: 6 }, () => backoff.next())).toEqual([
      100, 200, 400, 800, 1_000, 1_000,
    ]);
    expect(backoff.attempts).toBe(6);
  });

  it('takes up to the jitter share off each delay, at random', () => {
    const low = createBackoff({ initialDelayMs: 1_000, jitter: 0.5, random: () => 0.999_999 });
    const high = createBackoff({ initialDelayMs: 1_000, jitter: 0.5, random: () => 0 });
    expect(low.next()).toBe(500);
    expect(high.next()).toBe(1_000);
    const real = createBackoff({ initialDelayMs: 1_000, maxDelayMs: 1_000 });
    const delays = Array.from({ length: 200 }, () => real.next());
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...delays)).toBeLessThanOrEqual(1_000);
    expect(new Set(delays).size).toBeGreaterThan(10);
  });

  it('starts over after a reset', () => {
    const backoff = createBackoff({ initialDelayMs: 50, jitter: 0 });
    backoff.next();
    backoff.next();
    backoff.reset();
    expect(backoff.next()).toBe(50);
  });

  it('refuses contradictory options', () => {
    expect(() => createBackoff({ initialDelayMs: 500, maxDelayMs: 100 })).toThrow(RangeError);
    expect(() => createBackoff({ jitter: 2 })).toThrow(RangeError);
  });
});
