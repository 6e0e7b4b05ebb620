import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const targets = await dbTargets();
const nul = '\u0000';

async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  return { status: res.status, code: body.error?.code ?? '', message: body.error?.message ?? '' };
}

for (const target of targets) {
  const title = target.skip
    ? `NUL characters on ${target.name}: skipped, ${target.skip}`
    : `NUL characters on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let h: AuthHarness;
    beforeAll(async () => {
      h = await startAuth(target);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('refuses a NUL in verify fields with 400 naming the field, and the link still works after', async () => {
      await h.request('GET', '/auth/login?email=nul-verify@example.com');
      const token = await h.linkToken('nul-verify@example.com');
      const refused = [
        `deviceName=${encodeURIComponent(`lap${nul}top`)}&platform=linux`,
        `deviceName=laptop&platform=${encodeURIComponent(`li${nul}nux`)}`,
      ];
      for (const query of refused) {
        const res = await h.request('GET', `/auth/verify?token=${token}&${query}`);
        const error = await errorOf(res);
        expect(error.status).toBe(400);
        expect(error.code).toBe('invalid_request');
        expect(error.message).toMatch(/^(deviceName|platform) must not contain a NUL character$/);
      }
      const token404 = await h.request(
        'GET',
        `/auth/verify?token=${token}${encodeURIComponent(nul)}`,
      );
      expect(await errorOf(token404)).toMatchObject({ status: 400, code: 'invalid_request' });
      const ok = await h.request(
        'GET',
        `/auth/verify?token=${token}&deviceName=laptop&platform=linux`,
      );
      expect(ok.status).toBe(200);
    });

    it('refuses a NUL in e-mails, device and project fields with 400 and stores nothing', async () => {
      for (const res of [
        await h.request('GET', `/auth/login?email=${encodeURIComponent(`a${nul}@example.com`)}`),
        await h.request('POST', '/auth/magic-link', { body: { email: `b@exa${nul}mple.com` } }),
      ])
        expect(await errorOf(res)).toMatchObject({ status: 400, code: 'invalid_request' });

      const me = await h.signIn('nul-fields@example.com');
      for (const body of [
        { projectKey: `key${nul}`, name: 'Notes' },
        { projectKey: 'key', name: `No${nul}tes` },
      ]) {
        const res = await h.request('POST', '/auth/project', { token: me.deviceToken, body });
        expect(await errorOf(res)).toMatchObject({ status: 400, code: 'invalid_request' });
      }
      const projects = await h.request('GET', '/auth/projects', { token: me.deviceToken });
      expect(((await projects.json()) as { projects: unknown[] }).projects).toEqual([]);

      await h.request('GET', '/auth/login?email=nul-fields@example.com');
      const link = await h.linkToken('nul-fields@example.com');
      const { jwt } = (await (await h.request('GET', `/auth/verify?token=${link}`)).json()) as {
        jwt: string;
      };
      const device = await h.request('POST', '/auth/devices', {
        token: jwt,
        body: { deviceName: `pho${nul}ne`, platform: 'android' },
      });
      expect(await errorOf(device)).toMatchObject({ status: 400, code: 'invalid_request' });
      const devices = await h.request('GET', '/auth/devices', { token: me.deviceToken });
      expect(((await devices.json()) as { devices: unknown[] }).devices).toHaveLength(1);
      expect(h.logs.some((l) => l.includes('unhandled error'))).toBe(false);
    });
  });
}
