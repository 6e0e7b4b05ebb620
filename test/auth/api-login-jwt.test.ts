import { expect, it } from 'vitest';
import { signLoginJwt } from '../../server/auth/jwt.ts';
import type { SignedIn } from '../helpers/auth-harness.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits } from './api-helpers.ts';

await describeEachDatabase('auth API: login with a JWT', { limits: roomyLimits }, (h) => {
  it('verify without device data returns a JWT that registers a device (header or body)', async () => {
    const email = freshEmail();
    const sent = await h.request('POST', '/auth/magic-link', { body: { email } });
    expect(await sent.json()).toEqual({ sent: true });
    const token = await h.linkToken(email);
    const verify = await h.request('GET', `/auth/verify?token=${token}`);
    expect(verify.status).toBe(200);
    const { jwt, user } = (await verify.json()) as {
      jwt: string;
      user: { id: number; email: string };
    };
    expect(user.email).toBe(email);
    expect(jwt.split('.')).toHaveLength(3);
    const byHeader = await h.request('POST', '/auth/devices', {
      token: jwt,
      body: { deviceName: 'Desk', platform: 'win32' },
    });
    expect(byHeader.status).toBe(201);
    const registered = (await byHeader.json()) as SignedIn;
    expect(registered.device).toMatchObject({
      userId: user.id,
      deviceName: 'Desk',
      platform: 'win32',
    });
    const byBody = await h.request('POST', '/auth/devices', {
      body: { jwt, deviceName: 'Tablet', platform: 'android' },
    });
    expect(byBody.status).toBe(201);
    const me = await h.request('GET', '/auth/device', { token: registered.deviceToken });
    expect(((await me.json()) as { user: { email: string } }).user.email).toBe(email);
  });

  it('refuses an expired JWT, a JWT signed with another secret, and a device token used as a JWT', async () => {
    const me = await h.signIn(freshEmail());
    const old = await signLoginJwt(me.user.id, h.secret, h.clock.now - 16 * 60_000);
    const foreign = await signLoginJwt(me.user.id, 'another-secret', h.clock.now);
    for (const token of [old, foreign, me.deviceToken, 'a.b.c']) {
      const res = await h.request('POST', '/auth/devices', {
        token,
        body: { deviceName: 'x', platform: 'y' },
      });
      expect(res.status).toBe(401);
      expect(await errorCode(res)).toBe('unauthorized');
    }
  });

  it('refuses a JWT used as a device token', async () => {
    const me = await h.signIn(freshEmail());
    const jwt = await signLoginJwt(me.user.id, h.secret, h.clock.now);
    const res = await h.request('GET', '/auth/device', { token: jwt });
    expect(res.status).toBe(401);
  });
});
