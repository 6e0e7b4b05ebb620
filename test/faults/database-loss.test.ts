import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuthHarness, type SignedIn, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * Database loss while requests are in flight. test/auth/database-outage.test.ts covers an idle
 * cut through the proxy; this suite keeps traffic running across the fault, and also kills the
 * server side of the connections (pg_terminate_backend / KILL) on the test's own database.
 */
const targets = (await dbTargets()).filter((t) => t.name === 'postgres' || t.name === 'mysql');

/** Kills every server-side connection to `database` (only the test's own database). */
async function killBackends(driver: 'postgres' | 'mysql', database: string): Promise<number> {
  if (driver === 'postgres') {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: 5432,
      user: 'postgres',
      database: 'postgres',
    });
    await client.connect();
    try {
      const res = await client.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [database],
      );
      return res.rowCount ?? 0;
    } finally {
      await client.end();
    }
  }
  const conn = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
  try {
    const [rows] = await conn.query<mysql.RowDataPacket[]>(
      'select id from information_schema.processlist where db = ? and id <> connection_id()',
      [database],
    );
    for (const row of rows) await conn.query(`kill ${Number(row.id)}`).catch(() => undefined);
    return rows.length;
  } finally {
    await conn.end();
  }
}

/** Requests of every kind in a loop until stopped; records every status and any bad body. */
function traffic(h: AuthHarness, me: SignedIn) {
  const statuses = new Map<number, number>();
  const bad: string[] = [];
  let running = true;
  let n = 0;
  const one = async () => {
    const i = n++;
    const kinds = [
      () => h.request('GET', '/auth/devices', { token: me.deviceToken }),
      () => h.request('GET', '/auth/subscription', { token: me.deviceToken }),
      () =>
        h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey: `k${i % 5}`, name: 'n' },
        }),
      () => h.request('POST', '/auth/magic-link', { body: { email: `u${i % 50}@example.com` } }),
      () => h.request('GET', '/health'),
    ];
    const res = await (kinds[i % kinds.length] as () => Promise<Response>)();
    const text = await res.text();
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    if (![200, 201, 429, 503].includes(res.status) || /\n\s+at |ECONN|stack/.test(text))
      bad.push(`${res.status} ${text.slice(0, 200)}`);
  };
  const workers = Array.from({ length: 4 }, async () => {
    while (running) await one();
  });
  return {
    statuses,
    bad,
    count: () => n,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

for (const target of targets) {
  const title = target.skip
    ? `database loss under traffic on ${target.name}: skipped, ${target.skip}`
    : `database loss under traffic on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let proxy: TcpProxy | undefined;
    const harnesses: AuthHarness[] = [];
    afterAll(async () => {
      for (const h of harnesses) await h.close();
      await proxy?.close();
    });

    const limits = {
      linksPerEmail: { points: 100_000, seconds: 60 },
      linksPerClient: { points: 100_000, seconds: 60 },
    };

    it('answers 503, never 500, while the proxy cuts the database mid-traffic, and recovers alone', async () => {
      const p = await startTcpProxy('127.0.0.1', target.name === 'postgres' ? 5432 : 3306);
      proxy = p;
      const h = await startAuth(target, {
        limits,
        conf: { DEFAULT_TIER: 'pro' },
        mapDb: (c) => (c.driver === 'sqlite' ? c : { ...c, port: p.port }),
      });
      harnesses.push(h);
      const me = await h.signIn('traffic@example.com');
      const load = traffic(h, me);
      await eventually(() => (load.count() > 40 ? true : undefined), 'traffic before the cut');
      await p.cut();
      await eventually(
        () => ((load.statuses.get(503) ?? 0) > 10 ? true : undefined),
        '503s during the cut',
        10_000,
      );
      await p.restore();
      const before = load.statuses.get(200) ?? 0;
      await eventually(
        () => ((load.statuses.get(200) ?? 0) > before + 40 ? true : undefined),
        'successes after the restore',
        15_000,
      );
      await load.stop();
      expect(load.bad).toEqual([]);
      expect(load.statuses.has(500)).toBe(false);
      expect((await h.request('GET', '/health')).status).toBe(200);
      expect(h.logs.some((l) => l.includes('unhandled error'))).toBe(false);
    }, 40_000);

    it('recovers by itself when the server kills every connection mid-traffic', async () => {
      const h = await startAuth(target, { limits, conf: { DEFAULT_TIER: 'pro' } });
      harnesses.push(h);
      if (h.config.db.driver === 'sqlite') throw new Error('expected a server database');
      const database = h.config.db.database;
      const me = await h.signIn('killed@example.com');
      const load = traffic(h, me);
      for (let round = 0; round < 3; round++) {
        const at = load.count();
        await eventually(
          () => (load.count() > at + 30 ? true : undefined),
          'traffic between kills',
        );
        expect(await killBackends(target.name as 'postgres' | 'mysql', database)).toBeGreaterThan(
          0,
        );
      }
      const ok = load.statuses.get(200) ?? 0;
      await eventually(
        () => ((load.statuses.get(200) ?? 0) > ok + 40 ? true : undefined),
        'successes after the kills',
        15_000,
      );
      await load.stop();
      expect(load.bad).toEqual([]);
      expect(load.statuses.has(500)).toBe(false);
      expect((await h.request('GET', '/health')).status).toBe(200);
      const devices = await h.request('GET', '/auth/devices', { token: me.deviceToken });
      expect(devices.status).toBe(200);
    }, 40_000);
  });
}
