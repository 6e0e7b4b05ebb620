import { expect, it } from 'vitest';
import type { SignedIn } from '../helpers/auth-harness.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits } from './api-helpers.ts';

await describeEachDatabase(
  'auth API: login with device data on verify',
  { limits: roomyLimits },
  (h) => {
    it('answers sent:true, prints the dev-mode line, and verify returns a device token, device and user', async () => {
      const email = freshEmail();
      const res = await h.request(
        'GET',
        `/auth/login?email=${encodeURIComponent(`  ${email.toUpperCase()} `)}`,
      );
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ sent: true });
      const token = await h.linkToken(email);
      expect(token).toMatch(/^[0-9a-f]{64}$/);
      const verify = await h.request(
        'GET',
        `/auth/verify?token=${token}&deviceName=Laptop&platform=linux`,
      );
      expect(verify.status).toBe(200);
      const body = (await verify.json()) as SignedIn & { device: Record<string, unknown> };
      expect(body.user.email).toBe(email);
      expect(body.device).toMatchObject({
        userId: body.user.id,
        deviceName: 'Laptop',
        platform: 'linux',
      });
      expect(Object.keys(body.device).sort()).toEqual([
        'createdAt',
        'deviceName',
        'id',
        'lastSeen',
        'platform',
        'userId',
      ]);
      expect(body.deviceToken).toMatch(
        new RegExp(`^${body.user.id}:${body.device.id}:\\d+\\.[0-9a-f]{64}$`),
      );
      const sub = await h.request('GET', '/auth/subscription', { token: body.deviceToken });
      expect(await sub.json()).toEqual({
        tier: 'free',
        effectiveTier: 'free',
        expiresAt: null,
        projectLimit: 0,
      });
    });

    it('refuses a second use of the same link with token_used', async () => {
      const email = freshEmail();
      await h.signIn(email);
      const token = await h.linkToken(email);
      const again = await h.request('GET', `/auth/verify?token=${token}&deviceName=x&platform=y`);
      expect(again.status).toBe(401);
      expect(await errorCode(again)).toBe('token_used');
    });

    it('lets exactly one of many concurrent verifies of one link succeed', async () => {
      const email = freshEmail();
      await h.request('GET', `/auth/login?email=${email}`);
      const token = await h.linkToken(email);
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          h.request('GET', `/auth/verify?token=${token}&deviceName=d${i}&platform=p`),
        ),
      );
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect(statuses.filter((s) => s === 401)).toHaveLength(11);
      const devices = await h.server.db.kysely
        .selectFrom('devices')
        .innerJoin('users', 'users.id', 'devices.userId')
        .select('devices.id')
        .where('users.email', '=', email)
        .execute();
      expect(devices).toHaveLength(1);
    });

    it('refuses an expired link with token_expired (clock injected)', async () => {
      const email = freshEmail();
      await h.request('GET', `/auth/login?email=${email}`);
      const token = await h.linkToken(email);
      h.clock.advance(15 * 60_000 + 1_000);
      const res = await h.request('GET', `/auth/verify?token=${token}`);
      expect(res.status).toBe(401);
      expect(await errorCode(res)).toBe('token_expired');
    });

    it('refuses an unknown or malformed link token with invalid_token and a missing one with invalid_request', async () => {
      for (const token of ['0'.repeat(64), 'not-hex', "' or 1=1 --"]) {
        const res = await h.request('GET', `/auth/verify?token=${encodeURIComponent(token)}`);
        expect(res.status).toBe(401);
        expect(await errorCode(res)).toBe('invalid_token');
      }
      const missing = await h.request('GET', '/auth/verify');
      expect(missing.status).toBe(400);
      expect(await errorCode(missing)).toBe('invalid_request');
    });

    it('refuses a verify with only one of deviceName and platform, without using the link', async () => {
      const email = freshEmail();
      await h.request('GET', `/auth/login?email=${email}`);
      const token = await h.linkToken(email);
      const res = await h.request('GET', `/auth/verify?token=${token}&deviceName=only`);
      expect(res.status).toBe(400);
      expect(await errorCode(res)).toBe('invalid_request');
      const ok = await h.request('GET', `/auth/verify?token=${token}&deviceName=a&platform=b`);
      expect(ok.status).toBe(200);
    });

    it('gives a browser an HTML page with the same status', async () => {
      const email = freshEmail();
      await h.request('GET', `/auth/login?email=${email}`);
      const token = await h.linkToken(email);
      const accept = {
        accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
      };
      // Opening the link shows a confirm button; its form post uses the link.
      const form = { ...accept, 'content-type': 'application/x-www-form-urlencoded' };
      const confirm = await h.request(
        'GET',
        `/auth/verify?token=${token}&deviceName=a&platform=b`,
        {
          headers: accept,
        },
      );
      expect(confirm.status).toBe(200);
      expect(await confirm.text()).toContain('<form method="post"');
      const ok = await h.request('POST', '/auth/verify', {
        body: `token=${token}&deviceName=a&platform=b`,
        headers: form,
      });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toMatch(/text\/html/);
      expect(await ok.text()).toMatch(/Signed in as .*Copy/s);
      const used = await h.request('POST', '/auth/verify', {
        body: `token=${token}&deviceName=a&platform=b`,
        headers: form,
      });
      expect(used.status).toBe(401);
      expect(await used.text()).toContain('already used');
    });
  },
);
