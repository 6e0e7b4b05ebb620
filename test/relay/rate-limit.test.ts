import { describe, expect, it } from 'vitest';
import { createTokenBucket, turnClockMs } from '../../server/relay/rate-limit.ts';

describe('the per-connection token bucket', () => {
  it('lets a burst through, refuses the next frame, and refills at the configured rate', () => {
    let now = 1_000;
    const bucket = createTokenBucket(10, 3, () => now);
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    now += 100; // one token at 10 per second
    expect([bucket.take(), bucket.take()]).toEqual([true, false]);
    now += 60_000; // never more than the burst
    expect([bucket.take(), bucket.take(), bucket.take(), bucket.take()]).toEqual([
      true,
      true,
      true,
      false,
    ]);
  });
});

describe('the relay turn clock', () => {
  it('stands still within one event-loop turn and moves on in the next', async () => {
    const first = turnClockMs();
    const busyUntil = performance.now() + 5;
    while (performance.now() < busyUntil) {
      // a long synchronous stretch: the clock of this turn does not move
    }
    expect(turnClockMs()).toBe(first);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(turnClockMs()).toBeGreaterThan(first + 4);
  });
});
