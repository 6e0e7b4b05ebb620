import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAuthConfig } from '../../server/config/auth-config.ts';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const targets = await dbTargets();

async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  return { status: res.status, code: body.error?.code ?? '', message: body.error?.message ?? '' };
}

describe('DEVICE_LIMIT', () => {
  it('defaults to 100 and refuses a limit that is not a positive whole number', () => {
    const build = (value?: string) =>
      buildAuthConfig(
        value === undefined ? [] : [{ key: 'DEVICE_LIMIT', value, line: 1 }],
        'auth.conf',
        '/tmp',
      );
    expect(build().deviceLimit).toBe(100);
    expect(build('7').deviceLimit).toBe(7);
    for (const bad of ['0', '-1', '2.5', 'many']) expect(() => build(bad)).toThrow(/DEVICE_LIMIT/);
  });
});

for (const target of targets) {
  const title = target.skip
    ? `device limits on ${target.name}: skipped, ${target.skip}`
    : `device limits on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let h: AuthHarness;
    beforeAll(async () => {
      h = await startAuth(target, { conf: { DEVICE_LIMIT: '3' } });
    });
    afterAll(async () => {
      await h?.close();
    });

    const jwtFor = async (email: string): Promise<string> => {
      await h.request('GET', `/auth/login?email=${encodeURIComponent(email)}`);
      const link = await h.linkToken(email);
      const res = await h.request('GET', `/auth/verify?token=${link}`);
      return ((await res.json()) as { jwt: string }).jwt;
    };
    const register = (jwt: string, deviceName: string) =>
      h.request('POST', '/auth/devices', { token: jwt, body: { deviceName, platform: 'linux' } });

    it('refuses a device beyond the per-user limit with 403 device_limit, on both ways of registering, and burns no link', async () => {
      const me = await h.signIn('many-devices@example.com');
      const jwt = await jwtFor('many-devices@example.com');
      expect((await register(jwt, 'two')).status).toBe(201);
      expect((await register(jwt, 'three')).status).toBe(201);
      const refused = await errorOf(await register(jwt, 'four'));
      expect(refused).toMatchObject({ status: 403, code: 'device_limit' });
      expect(refused.message).toContain('3 devices');
      expect(refused.message).toContain('DEVICE_LIMIT');

      await h.request('GET', '/auth/login?email=many-devices@example.com');
      const link = await h.linkToken('many-devices@example.com');
      const viaLink = `/auth/verify?token=${link}&deviceName=five&platform=linux`;
      expect(await errorOf(await h.request('GET', viaLink))).toMatchObject({
        status: 403,
        code: 'device_limit',
      });
      const list = await h.request('GET', '/auth/devices', { token: me.deviceToken });
      const { devices } = (await list.json()) as { devices: Array<{ id: number }> };
      expect(devices).toHaveLength(3);

      const last = devices.at(-1)?.id;
      expect(
        (await h.request('DELETE', `/auth/device/${last}`, { token: me.deviceToken })).status,
      ).toBe(204);
      expect((await h.request('GET', viaLink)).status).toBe(200);
    });

    it('lets one login JWT register at most 5 devices; a new sign-in code registers more', async () => {
      const d = await startAuth(target);
      try {
        await d.request('GET', '/auth/login?email=one-jwt@example.com');
        const link = await d.linkToken('one-jwt@example.com');
        const { jwt } = (await (await d.request('GET', `/auth/verify?token=${link}`)).json()) as {
          jwt: string;
        };
        const add = (token: string, i: number) =>
          d.request('POST', '/auth/devices', {
            token,
            body: { deviceName: `device ${i}`, platform: 'linux' },
          });
        for (let i = 1; i <= 5; i++) expect((await add(jwt, i)).status).toBe(201);
        const sixth = await add(jwt, 6);
        expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(0);
        const error = await errorOf(sixth);
        expect(error).toMatchObject({ status: 429, code: 'rate_limited' });
        expect(error.message).toContain('sign in again');
        d.clock.advance(1_000); // a JWT of the same second would be the same bytes
        await d.request('GET', '/auth/login?email=one-jwt@example.com');
        const again = await d.linkToken('one-jwt@example.com');
        const next = (await (await d.request('GET', `/auth/verify?token=${again}`)).json()) as {
          jwt: string;
        };
        expect((await add(next.jwt, 7)).status).toBe(201);
        expect(d.logs.join('\n').includes(jwt)).toBe(false);
      } finally {
        await d.close();
      }
    });
  });
}
