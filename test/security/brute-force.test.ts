import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultAuthLimits } from '../../server/auth/rate-limits.ts';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

const [sqlite] = await dbTargets();
if (!sqlite) throw new Error('no sqlite target');

const guesses = (n: number) => Array.from({ length: n }, () => randomBytes(32).toString('hex'));

// Every request of these tests comes from 127.0.0.1: the attacker and the people with valid
// credentials share one client address, as behind a reverse proxy or a NAT.
describe('brute force of magic-link and device tokens', () => {
  let h: AuthHarness;
  afterAll(async () => {
    await h?.close();
  });

  it('rate limits link-token guesses per client, still accepts the right token from the same address, and logs it without tokens', async () => {
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
    const blocked = await h.request('GET', `/auth/verify?token=${guesses(1)[0]}`);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    const right = await h.request('GET', `/auth/verify?token=${real}`);
    expect(right.status).toBe(200);
    expect((await h.request('GET', `/auth/verify?token=${guesses(1)[0]}`)).status).toBe(429);
    const logged = h.logs.filter((l) => l.includes('rate limit reached'));
    expect(logged.some((l) => l.includes('verifies per client'))).toBe(true);
    for (const token of [...tried, real]) expect(h.logs.join('\n').includes(token)).toBe(false);
  });

  it('does not count successful verifies against the client address', async () => {
    const d = await startAuth(sqlite, {
      limits: { verifiesPerClient: { points: 3, seconds: 900 } },
    });
    try {
      for (let i = 0; i < 6; i++) await d.signIn(`user${i}@example.com`);
    } finally {
      await d.close();
    }
  });

  it('rate limits device-token guesses, keeps valid device tokens working from the same address, and logs them without tokens', async () => {
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
      expect((await d.request('GET', '/auth/devices', { token: me.deviceToken })).status).toBe(200);
      expect((await d.request('GET', '/auth/devices', { token: forged[0] })).status).toBe(429);
      expect(d.logs.some((l) => l.includes('rate limit reached'))).toBe(true);
      const all = d.logs.join('\n');
      for (const token of [...forged, me.deviceToken]) expect(all.includes(token)).toBe(false);
    } finally {
      await d.close();
    }
  });

  it('keeps valid device tokens working after 100 junk bearer tokens from their address (default limits)', async () => {
    const d = await startAuth(sqlite);
    try {
      const people = [await d.signIn('ann@example.com'), await d.signIn('bob@example.com')];
      const junk = defaultAuthLimits.authFailuresPerClient.points;
      for (let i = 0; i < junk; i++)
        expect((await d.request('GET', '/auth/device', { token: `junk-${i}` })).status).toBe(401);
      expect((await d.request('GET', '/auth/device', { token: 'junk-more' })).status).toBe(429);
      for (const person of people) {
        const res = await d.request('GET', '/auth/device', { token: person.deviceToken });
        expect(res.status).toBe(200);
        expect(((await res.json()) as { device: { id: number } }).device.id).toBe(person.device.id);
      }
      expect((await d.request('GET', '/auth/device')).status).toBe(429);
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

  it('blocks guessing after repeated wrong admin tokens but lets the right one through from the same address, and logs each try', async () => {
    t = await startTestHost({ ui: false, logs, failureLimit: { points: 8, seconds: 900 } });
    const tried = guesses(10);
    const statuses: number[] = [];
    for (const guess of tried)
      statuses.push((await t.admin('GET', '/overview', undefined, guess)).status);
    expect(statuses.slice(0, 8)).toEqual(Array(8).fill(401));
    expect(statuses.slice(8)).toEqual([429, 429]);
    const blocked = await t.admin('GET', '/overview', undefined, guesses(1)[0]);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await t.admin('GET', '/overview')).status).toBe(200);
    expect((await t.admin('GET', '/overview', undefined, guesses(1)[0])).status).toBe(429);
    const rejected = logs.filter((l) => l.includes('admin API: rejected'));
    expect(rejected.length).toBe(8);
    const all = logs.join('\n');
    for (const token of [...tried, t.host.adminToken]) expect(all.includes(token)).toBe(false);
  });

  it('lets the right admin token through after 20 wrong ones from the same address (default limit)', async () => {
    const d = await startTestHost({ ui: false });
    try {
      for (let i = 0; i < 20; i++)
        expect((await d.admin('GET', '/overview', undefined, `wrong-${i}`)).status).toBe(401);
      expect((await d.admin('GET', '/overview', undefined, 'wrong-more')).status).toBe(429);
      expect((await d.admin('GET', '/overview')).status).toBe(200);
    } finally {
      await d.close();
    }
  });
});
