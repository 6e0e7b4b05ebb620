import { describe, expect, it } from 'vitest';
import { KeepAlive } from '../../client/keep-alive.ts';
import { TokenBucket } from '../../client/token-bucket.ts';
import { ManualClock } from './manual-clock.ts';

/**
 * The ping confirming written frames costs a token like any frame: while frames go at the rate,
 * at most one per 100 ms, so a large file's chunk frames keep most of the rate.
 */
describe('confirming pings', () => {
  it('go at once below the rate, and at the rate only 100 ms after the last ping', () => {
    const clock = new ManualClock();
    clock.advance(1_000);
    const keepAlive = new KeepAlive({
      clock,
      keepAliveMs: 25_000,
      pongTimeoutMs: 10_000,
      sendPing: () => true,
      onDead: () => undefined,
    });
    keepAlive.start();
    keepAlive.written({ seq: 1, text: '{}' });
    expect(keepAlive.confirmingPingInMs(false)).toBe(0);
    keepAlive.ping();
    expect(keepAlive.confirmingPingInMs(false)).toBe(0);
    expect(keepAlive.confirmingPingInMs(true)).toBe(100);
    clock.advance(60);
    expect(keepAlive.confirmingPingInMs(true)).toBe(40);
    clock.advance(40);
    expect(keepAlive.confirmingPingInMs(true)).toBe(0);
  });

  it('count as at the rate once the bucket holds less than half its burst', () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(100, 10, () => clock.now());
    for (let n = 0; n < 5; n++) bucket.take();
    expect(bucket.atRate()).toBe(false);
    bucket.take();
    expect(bucket.atRate()).toBe(true);
    clock.advance(10); // one token back
    expect(bucket.atRate()).toBe(false);
  });
});
