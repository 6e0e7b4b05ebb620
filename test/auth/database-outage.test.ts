import { afterAll, describe, expect, it } from 'vitest';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { eventually } from '../helpers/wait.ts';

const targets = (await dbTargets()).filter((t) => t.name === 'postgres' || t.name === 'mysql');

for (const target of targets) {
  const title = target.skip
    ? `database outage on ${target.name}: skipped, ${target.skip}`
    : `database outage on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let proxy: TcpProxy;
    let h: AuthHarness;
    afterAll(async () => {
      await h?.close();
      await proxy?.close();
    });

    it('answers 503 while the database is cut off and recovers by itself when it is back', async () => {
      proxy = await startTcpProxy('127.0.0.1', target.name === 'postgres' ? 5432 : 3306);
      h = await startAuth(target, {
        mapDb: (c) => (c.driver === 'sqlite' ? c : { ...c, port: proxy.port }),
      });
      const me = await h.signIn('outage@example.com');
      expect((await h.request('GET', '/health')).status).toBe(200);

      await proxy.cut();
      await eventually(
        async () => ((await h.request('GET', '/health')).status === 503 ? true : undefined),
        '/health 503',
        8_000,
      );
      const health = await h.request('GET', '/health');
      expect(await health.json()).toEqual({ status: 'unavailable' });
      const during = await h.request('GET', '/auth/devices', { token: me.deviceToken });
      expect(during.status).toBe(503);
      const text = await during.text();
      expect(JSON.parse(text).error.code).toBe('unavailable');
      expect(text).not.toMatch(/ECONNREFUSED|at .*\.js:\d+/);
      const login = await h.request('GET', '/auth/login?email=another@example.com');
      expect(login.status).toBe(503);

      await proxy.restore();
      await eventually(
        async () => ((await h.request('GET', '/health')).status === 200 ? true : undefined),
        '/health 200 again',
        10_000,
      );
      const after = await h.request('GET', '/auth/devices', { token: me.deviceToken });
      expect(after.status).toBe(200);
    });
  });
}
