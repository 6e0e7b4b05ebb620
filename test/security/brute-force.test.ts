import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

const [sqlite] = await dbTargets();
if (!sqlite) throw new Error('no sqlite target');

const guesses = (n: number) => Array.from({ length: n }, () => randomBytes(32).toString('hex'));

describe('brute force of magic-link and device tokens', () => {
  let h: AuthHarness;
  afterAll(async () => {
    await h?.close();
  });

  it('rate limits link-token guesses, refuses even the right token then, and logs it without tokens', async () => {
    h = await startAuth(sqlite, {
      limits: { verifiesPerClient: { points: 20, seconds: 900 } },
    });
    await h.request('GET', '/auth/login?email=victim@example.com');
    const real = await h.linkToken('victim@example.com');
    const tried = guesses(25);
    const statuses: number[] = [];
    for (const guess of tried)
      statuses.push((await h.request('GET', `/auth/verify?token=${guess}`)).status);
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(20).every((s) => s === 429)).toBe(true);
    const blocked = await h.request('GET', `/auth/verify?token=${real}`);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    const logged = h.logs.filter((l) => l.includes('rate limit reached'));
    expect(logged.some((l) => l.includes('verifies per client'))).toBe(true);
    for (const token of [...tried, real]) expect(h.logs.join('\n').includes(token)).toBe(false);
  });

  it('rate limits device-token guesses and logs them without tokens', async () => {
    const d = await startAuth(sqlite, {
      limits: { authFailuresPerClient: { points: 15, seconds: 900 } },
    });
    try {
      const me = await d.signIn('owner@example.com');
      const forged = Array.from(
        { length: 20 },
        (_, i) =>
          `${me.user.id}:${me.device.id}:${1_700_000_000 + i}.${randomBytes(32).toString('hex')}`,
      );
      const statuses: number[] = [];
      for (const token of forged)
        statuses.push((await d.request('GET', '/auth/devices', { token })).status);
      expect(statuses.slice(0, 15).every((s) => s === 401)).toBe(true);
      expect(statuses.at(-1)).toBe(429);
      expect(d.logs.some((l) => l.includes('rate limit reached'))).toBe(true);
      const all = d.logs.join('\n');
      for (const token of [...forged, me.deviceToken]) expect(all.includes(token)).toBe(false);
    } finally {
      await d.close();
    }
  });
});

describe('brute force of the admin token', () => {
  let t: TestHost;
  const logs: string[] = [];
  afterAll(async () => {
    await t?.close();
  });

  it('blocks a client after repeated wrong admin tokens, even with the right one, and logs each try', async () => {
    t = await startTestHost({ ui: false, logs, failureLimit: { points: 8, seconds: 900 } });
    const tried = guesses(10);
    const statuses: number[] = [];
    for (const guess of tried)
      statuses.push((await t.admin('GET', '/overview', undefined, guess)).status);
    expect(statuses.slice(0, 8)).toEqual(Array(8).fill(401));
    expect(statuses.slice(8)).toEqual([429, 429]);
    const right = await t.admin('GET', '/overview');
    expect(right.status).toBe(429);
    expect(Number(right.headers.get('retry-after'))).toBeGreaterThan(0);
    const rejected = logs.filter((l) => l.includes('admin API: rejected'));
    expect(rejected.length).toBe(8);
    const all = logs.join('\n');
    for (const token of [...tried, t.host.adminToken]) expect(all.includes(token)).toBe(false);
  });
});
