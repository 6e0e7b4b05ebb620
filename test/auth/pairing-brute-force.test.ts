import { afterAll, describe, expect, it } from 'vitest';
import { type AuthHarness, roomyLimits, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

/** Guessing pairing codes and ids: limited per approver and per client address (SQLite only). */

const targets = await dbTargets();
const limits = roomyLimits;

const [sqlite] = targets;
describe('pairing brute force', () => {
  let h: AuthHarness;
  afterAll(async () => {
    await h?.close();
  });

  it('limits wrong codes per approver (then even its right code) and per client address (failures only)', async () => {
    h = await startAuth(sqlite!, {
      admin: true,
      limits: {
        ...limits,
        pairCodeFailuresPerApprover: { points: 3, seconds: 900 },
        pairCodeFailuresPerClient: { points: 5, seconds: 900 },
      },
    });
    const one = await h.signIn('one@example.com');
    const two = await h.signIn('two@example.com');
    const started = (await (
      await h.request('POST', '/auth/pair', { body: { deviceName: 'p', platform: 'q' } })
    ).json()) as { code: string };
    const approve = (token: string, code: string) =>
      h.request('POST', '/auth/pair/approve', { token, body: { code } });

    for (let i = 0; i < 3; i++)
      expect((await approve(one.deviceToken, 'BBBB-BBBB')).status).toBe(404);
    const blocked = await approve(one.deviceToken, started.code);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).not.toBeNull();

    // Another device on the same address: its wrong codes are refused once the address used up
    // its five, but the address counts only failures, so its right code still passes.
    for (let i = 0; i < 2; i++)
      expect((await approve(two.deviceToken, 'CCCC-CCCC')).status).toBe(404);
    expect((await approve(two.deviceToken, started.code)).status).toBe(200);
    expect((await approve(two.deviceToken, 'DDDD-DDDD')).status).toBe(429);
    expect(h.logs.some((l) => l.includes('wrong pairing codes'))).toBe(true);
  });

  it('limits polls of unknown pairingIds and pairing creation per client address', async () => {
    await h.close();
    h = await startAuth(sqlite!, {
      limits: {
        ...limits,
        pairPollFailuresPerClient: { points: 4, seconds: 900 },
        pairingsPerClient: { points: 2, seconds: 900 },
      },
    });
    for (let i = 0; i < 4; i++) {
      const guess = `${'0'.repeat(60)}${String(1000 + i)}`;
      expect((await h.request('GET', `/auth/pair/${guess}`)).status).toBe(404);
    }
    expect((await h.request('GET', `/auth/pair/${'f'.repeat(64)}`)).status).toBe(429);

    const body = { deviceName: 'p', platform: 'q' };
    expect((await h.request('POST', '/auth/pair', { body })).status).toBe(201);
    expect((await h.request('POST', '/auth/pair', { body })).status).toBe(201);
    expect((await h.request('POST', '/auth/pair', { body })).status).toBe(429);
  });
});
