import { afterEach, describe, expect, it } from 'vitest';
import { type AuthHarness, adminToken, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const sqlite = (await dbTargets()).find((t) => t.name === 'sqlite');
if (sqlite === undefined) throw new Error('no sqlite target');

let h: AuthHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** A pairing request through the trusted proxy (127.0.0.1) for client `address`. */
const pair = (a: AuthHarness, address: string) =>
  a.request('POST', '/auth/pair', {
    body: { deviceName: 'd', platform: 'p' },
    headers: { 'x-forwarded-for': address },
  });

const pendingCount = async (a: AuthHarness) =>
  (
    (await (await a.request('GET', '/admin/api/pairings', { token: adminToken })).json()) as {
      pairings: unknown[];
    }
  ).pairings.length;

describe('pairing limits', () => {
  it('count IPv6 addresses by their /64: another address of the prefix shares its limit', async () => {
    h = await startAuth(sqlite, {
      admin: true,
      conf: { 'trust.proxy': '127.0.0.1, ::1' },
      limits: { pairingsPerClient: { points: 2, seconds: 900 } },
    });
    expect((await pair(h, '2001:db8:aa:bb::1')).status).toBe(201);
    expect((await pair(h, '2001:db8:aa:bb:ffff::2')).status).toBe(201);
    const third = await pair(h, '2001:db8:aa:bb:1234:5678:9abc:def0');
    expect(third.status).toBe(429);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    // the next /64 and IPv4 addresses have their own
    expect((await pair(h, '2001:db8:aa:bc::1')).status).toBe(201);
    expect((await pair(h, '203.0.113.7')).status).toBe(201);
  });

  it('cap the pairings waiting at once for all addresses together, and free a place as one is settled', async () => {
    h = await startAuth(sqlite, {
      admin: true,
      conf: { 'trust.proxy': '127.0.0.1, ::1' },
      limits: { pendingPairings: 5 },
    });
    for (let i = 1; i <= 5; i++) expect((await pair(h, `198.51.100.${i}`)).status).toBe(201);
    const refused = await pair(h, '198.51.100.99');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toEqual({
      error: {
        code: 'rate_limited',
        message: 'too many devices are waiting for approval; try again in a few minutes',
      },
    });
    expect(await pendingCount(h)).toBe(5);
    expect(h.logs.some((l) => l.includes('pairing refused: too many pending'))).toBe(true);
    // a denial frees a place; so does the time (the injected clock past the 10 minutes)
    const pairings = (await (
      await h.request('GET', '/admin/api/pairings', { token: adminToken })
    ).json()) as { pairings: Array<{ code: string }> };
    const deny = await h.request('POST', '/admin/api/pairings/deny', {
      token: adminToken,
      body: { code: pairings.pairings[0]?.code },
    });
    expect(deny.status).toBe(204);
    expect((await pair(h, '198.51.100.99')).status).toBe(201);
    expect((await pair(h, '198.51.100.100')).status).toBe(429);
    h.clock.advance(10 * 60_000 + 1);
    expect((await pair(h, '198.51.100.100')).status).toBe(201);
  });

  it('cap the pairings waiting from one address, so that a flood from two leaves a place for a third', async () => {
    h = await startAuth(sqlite, {
      admin: true,
      conf: { 'trust.proxy': '127.0.0.1, ::1' },
      limits: { pendingPairings: 12, pendingPairingsPerClient: 5 },
    });
    for (const address of ['198.51.100.1', '2001:db8:aa:bb::1']) {
      for (let i = 0; i < 5; i++) expect((await pair(h, address)).status).toBe(201);
      const refused = await pair(h, address);
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
        'rate_limited',
      );
    }
    // Another address of the same /64 shares its cap.
    expect((await pair(h, '2001:db8:aa:bb::2')).status).toBe(429);
    expect(await pendingCount(h)).toBe(10);
    expect(h.logs.some((l) => l.includes('too many pending from this address'))).toBe(true);
    // A device at a third address still gets a place.
    expect((await pair(h, '203.0.113.9')).status).toBe(201);
  });

  it('never lock the administrator out of approving or denying by wrong codes', async () => {
    h = await startAuth(sqlite, {
      admin: true,
      conf: { 'trust.proxy': '127.0.0.1, ::1' },
      limits: { pairCodeFailuresPerApprover: { points: 2, seconds: 900 } },
    });
    const started = (await (await pair(h, '198.51.100.7')).json()) as { code: string };
    for (let i = 0; i < 5; i++) {
      const wrong = await h.request('POST', '/admin/api/pairings/deny', {
        token: adminToken,
        body: { code: 'BBBB-BBBB' },
      });
      expect(wrong.status).toBe(404);
    }
    const deny = await h.request('POST', '/admin/api/pairings/deny', {
      token: adminToken,
      body: { code: started.code },
    });
    expect(deny.status).toBe(204);
  });
});
