import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthHarness, type SignedIn, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const sqlite = (await dbTargets()).find((t) => t.name === 'sqlite');
if (sqlite === undefined) throw new Error('no sqlite target');

let h: AuthHarness;
let stranger: SignedIn;
beforeAll(async () => {
  h = await startAuth(sqlite, { admin: true });
  stranger = await h.signIn('stranger@example.com', 'desk', 'linux');
});
afterAll(async () => {
  await h?.close();
});

/** A new device asks to pair; the clock moves one interval before each poll. */
async function start(deviceName = 'phone'): Promise<{ pairingId: string; code: string }> {
  const res = await h.request('POST', '/auth/pair', { body: { deviceName, platform: 'android' } });
  expect(res.status).toBe(201);
  return (await res.json()) as { pairingId: string; code: string };
}
const poll = (pairingId: string) => {
  h.clock.advance(2_000);
  return h.request('GET', `/auth/pair/${pairingId}`);
};
const asStranger = (path: string, body: unknown) =>
  h.request('POST', path, { token: stranger.deviceToken, body });
const strangerDevices = async () =>
  (
    (await (await h.request('GET', '/auth/devices', { token: stranger.deviceToken })).json()) as {
      devices: Array<{ deviceName: string }>;
    }
  ).devices.map((d) => d.deviceName);

describe('a pairing approved by a signed-in device', () => {
  it('shows the new device the account it would join; declined, it is denied and its device removed', async () => {
    const started = await start();
    const approved = await asStranger('/auth/pair/approve', { code: started.code });
    expect(approved.status).toBe(200);
    expect(await approved.json()).toMatchObject({
      device: { deviceName: 'phone' },
      awaiting: 'acceptance',
    });
    const offered = await poll(started.pairingId);
    expect(offered.status).toBe(202);
    expect(await offered.json()).toEqual({
      status: 'confirm',
      email: 'stranger@example.com',
      approvedBy: { via: 'device', name: 'desk' },
    });
    // not taken effect: no token, however often it polls
    expect((await poll(started.pairingId)).status).toBe(202);

    const declined = await h.request('POST', '/auth/pair/decline', {
      body: { pairingId: started.pairingId },
    });
    expect(declined.status).toBe(204);
    const denied = await poll(started.pairingId);
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe('pair_denied');
    expect(await strangerDevices()).toEqual(['desk']);
    expect(
      (await h.request('POST', '/auth/pair/accept', { body: { pairingId: started.pairingId } }))
        .status,
    ).toBe(404);
    expect(h.logs.some((l) => l.includes('pairing declined by the new device'))).toBe(true);
  });

  it('lets the approver see the waiting device first, and approve only a device of the name it confirmed', async () => {
    const started = await start('laptop of bob');
    const described = await asStranger('/auth/pair/describe', { code: started.code });
    expect(described.status).toBe(200);
    expect(await described.json()).toMatchObject({
      pairing: { code: started.code, deviceName: 'laptop of bob', platform: 'android' },
    });
    const wrong = await asStranger('/auth/pair/approve', {
      code: started.code,
      deviceName: 'my laptop',
    });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({
      error: { code: 'invalid_request', message: expect.stringContaining('"laptop of bob"') },
    });
    expect(await (await poll(started.pairingId)).json()).toEqual({ status: 'pending' });
    const right = await asStranger('/auth/pair/approve', {
      code: started.code,
      deviceName: 'laptop of bob',
    });
    expect(right.status).toBe(200);
    expect(
      (await h.request('POST', '/auth/pair/accept', { body: { pairingId: started.pairingId } }))
        .status,
    ).toBe(204);
    const got = await poll(started.pairingId);
    expect(got.status).toBe(200);
    expect(await got.json()).toMatchObject({
      status: 'approved',
      user: { email: 'stranger@example.com' },
    });
    // an unknown code to describe is 404, counted as a wrong code
    expect((await asStranger('/auth/pair/describe', { code: 'BBBB-BBBB' })).status).toBe(404);
  });

  it('that the new device never answers is removed with its device once its time is over', async () => {
    const started = await start('tablet');
    expect((await asStranger('/auth/pair/approve', { code: started.code })).status).toBe(200);
    expect(await strangerDevices()).toContain('tablet');
    h.clock.advance(11 * 60_000);
    // housekeeping runs with the next request that lists or starts pairings
    await start('other');
    expect(await strangerDevices()).not.toContain('tablet');
    const late = await poll(started.pairingId);
    expect(late.status).toBe(401);
    expect(
      (await h.request('POST', '/auth/pair/accept', { body: { pairingId: started.pairingId } }))
        .status,
    ).toBe(404);
  });

  it('answers 404 to an accept or decline of an unknown pairing, and 400 to a malformed one', async () => {
    const unknown = 'ab'.repeat(32);
    for (const path of ['/auth/pair/accept', '/auth/pair/decline']) {
      expect((await h.request('POST', path, { body: { pairingId: unknown } })).status).toBe(404);
      expect((await h.request('POST', path, { body: {} })).status).toBe(400);
    }
  });
});
