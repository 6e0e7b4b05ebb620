import { expect, it } from 'vitest';
import { signDeviceToken } from '../../server/tokens.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits } from './api-helpers.ts';

await describeEachDatabase('auth API: device tokens', { limits: roomyLimits }, (h) => {
  it('refuses missing, tampered, foreign-user, wrong-secret and djb2 tokens', async () => {
    const me = await h.signIn(freshEmail());
    const other = await h.signIn(freshEmail());
    const [payload, hash] = me.deviceToken.split('.') as [string, string];
    const [, deviceId, ts] = payload.split(':');
    const flipped = `${payload}.${hash.slice(0, -1)}${hash.endsWith('0') ? '1' : '0'}`;
    const otherUser = `${other.user.id}:${deviceId}:${ts}.${hash}`;
    const resigned = signDeviceToken(
      { userId: other.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
      h.secret,
      'hmac-sha256',
    );
    const wrongSecret = signDeviceToken(
      { userId: me.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
      'not-the-secret',
      'hmac-sha256',
    );
    const djb2 = signDeviceToken(
      { userId: me.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
      h.secret,
      'djb2',
    );
    for (const token of [
      undefined,
      '',
      'garbage',
      flipped,
      otherUser,
      resigned,
      wrongSecret,
      djb2,
    ]) {
      const res = await h.request('GET', '/auth/device', { token });
      expect(res.status, String(token)).toBe(401);
      expect(await errorCode(res)).toBe('unauthorized');
    }
    expect((await h.request('GET', '/auth/device', { token: me.deviceToken })).status).toBe(200);
  });

  it('lists the caller’s devices ordered by id, without tokens', async () => {
    const email = freshEmail();
    const first = await h.signIn(email, 'one', 'linux');
    const second = await h.signIn(email, 'two', 'darwin');
    await h.signIn(freshEmail(), 'stranger', 'linux');
    const res = await h.request('GET', '/auth/devices', { token: second.deviceToken });
    const { devices } = (await res.json()) as { devices: Array<Record<string, unknown>> };
    expect(devices.map((d) => d.id)).toEqual([first.device.id, second.device.id]);
    expect(JSON.stringify(devices)).not.toContain(first.deviceToken.split('.')[1]);
    expect(devices.every((d) => !('token' in d))).toBe(true);
  });

  it('shows a device added or deleted after an earlier listing at once', async () => {
    const email = freshEmail();
    const first = await h.signIn(email, 'first');
    const ids = async () =>
      (
        (await (await h.request('GET', '/auth/devices', { token: first.deviceToken })).json()) as {
          devices: Array<{ id: number }>;
        }
      ).devices.map((d) => d.id);
    expect(await ids()).toEqual([first.device.id]);
    const second = await h.signIn(email, 'second');
    expect(await ids()).toEqual([first.device.id, second.device.id]);
    await h.request('DELETE', `/auth/device/${second.device.id}`, { token: first.deviceToken });
    expect(await ids()).toEqual([first.device.id]);
  });

  it('deletes a device, revokes its token at once and tells revocation listeners', async () => {
    const email = freshEmail();
    const keep = await h.signIn(email, 'keep');
    const drop = await h.signIn(email, 'drop');
    // Used once before, so its successful check is remembered (the caller cache).
    expect((await h.request('GET', '/auth/device', { token: drop.deviceToken })).status).toBe(200);
    const revoked: number[] = [];
    const off = h.server.service.onDeviceRevoked((id) => revoked.push(id));
    const res = await h.request('DELETE', `/auth/device/${drop.device.id}`, {
      token: keep.deviceToken,
    });
    off();
    expect(res.status).toBe(204);
    expect(revoked).toEqual([drop.device.id]);
    expect((await h.request('GET', '/auth/device', { token: drop.deviceToken })).status).toBe(401);
    expect((await h.request('GET', '/auth/device', { token: keep.deviceToken })).status).toBe(200);
  });

  it('answers 404 for another user’s device and for an unknown id, 400 for a malformed id', async () => {
    const me = await h.signIn(freshEmail());
    const other = await h.signIn(freshEmail());
    for (const id of [other.device.id, 999_999]) {
      const res = await h.request('DELETE', `/auth/device/${id}`, { token: me.deviceToken });
      expect(res.status).toBe(404);
      expect(await errorCode(res)).toBe('not_found');
    }
    expect((await h.request('GET', '/auth/device', { token: other.deviceToken })).status).toBe(200);
    const bad = await h.request('DELETE', '/auth/device/abc', { token: me.deviceToken });
    expect(bad.status).toBe(400);
  });

  it('refreshes lastSeen at most once a minute', async () => {
    const me = await h.signIn(freshEmail());
    const stored = async () =>
      (
        await h.server.db.kysely
          .selectFrom('devices')
          .select('lastSeen')
          .where('id', '=', me.device.id)
          .executeTakeFirstOrThrow()
      ).lastSeen;
    const before = new Date(await stored()).toISOString();
    h.clock.advance(30_000);
    await h.request('GET', '/auth/devices', { token: me.deviceToken });
    expect(new Date(await stored()).toISOString()).toBe(before);
    h.clock.advance(31_000);
    const res = await h.request('GET', '/auth/device', { token: me.deviceToken });
    const seen = ((await res.json()) as { device: { lastSeen: string } }).device.lastSeen;
    expect(seen).toBe(new Date(h.clock.now).toISOString());
    await expect.poll(async () => new Date(await stored()).toISOString()).toBe(seen);
  });
});
