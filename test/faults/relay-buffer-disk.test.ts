import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import { joinRelay, registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { type Disk, mountDisk, tmpfsUnavailable } from '../helpers/tmpfs.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * The relay buffer on a small tmpfs that fills up under the running relay: a real SQLITE_FULL
 * (or ENOSPC on sql.js). Needs root to mount it (skipped with the reason otherwise).
 */
const skip = tmpfsUnavailable();
const kib = 1024;

let disk: Disk | undefined;
let harness: RelayHarness | undefined;
let host: TestHost | undefined;

afterEach(async () => {
  await harness?.close();
  await host?.close();
  disk?.unmount();
  harness = undefined;
  host = undefined;
  disk = undefined;
});

async function metricsOf(statusUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

const health = async (statusUrl: string) => (await fetch(`${statusUrl}/health`)).status;
const big = (n: number) => ({ n, pad: 'x'.repeat(32 * kib) });

describe.skipIf(skip !== undefined).each(['native', 'wasm'] as const)(
  `relay buffer on a full disk (%s SQLite engine)${skip ? `: skipped, ${skip}` : ''}`,
  (engine) => {
    beforeAll(async () => {
      await chooseSqliteEngine(engine, createLogger('silent'));
    });

    it('a failed buffer write is a 503 on /health and counted in /metrics; the relay keeps routing, and is healthy again once space is back', async () => {
      disk = mountDisk(2048);
      harness = await startRelayHarness({
        config: {
          sqlitePath: join(disk.dir, 'relay.db'),
          ratePerSecond: 10_000,
          rateBurst: 10_000,
        },
      });
      const room = harness.room(1);
      const sender = (await harness.joined(room, 1, 1)).client;
      const live = (await harness.joined(room, 1, 3)).client;
      const away = (await harness.joined(room, 1, 2)).client;
      away.terminate();
      await sender.take((f) => f.type === 'presence' && f.state === 'left');
      sender.send({ to: 2, payload: { n: 0 } });
      await sender.sync();
      await eventually(() => harness?.relay.status().buffered === 1);
      expect(await health(harness.statusUrl)).toBe(200);

      disk.fill();
      for (let n = 1; n <= 20; n++) sender.send({ to: 'broadcast', payload: big(n) });
      await sender.sync();
      const url = harness.statusUrl;
      const failures = await eventually(async () => {
        const m = await metricsOf(url);
        return (m.get('relay_buffer_write_failures_total') ?? 0) > 0 && m;
      }, 'a failed buffer write');
      expect(await health(url)).toBe(503);
      if (engine === 'native') {
        expect(failures.get('relay_messages_dropped_total{reason="write_failed"}')).toBeGreaterThan(
          0,
        );
      }
      // live traffic is untouched: the connected device got every broadcast
      for (let n = 1; n <= 20; n++) expect((await live.message()).payload).toEqual(big(n));

      disk.free();
      await eventually(async () => (await health(url)) === 200, 'healthy again');
      const back = await harness.client();
      const joined = await back.join(room, 2, harness.token(1, 2));
      expect((await back.message()).payload).toEqual({ n: 0 });
      // native: the frames of the failed writes were dropped, and the device is told
      if (engine === 'native') expect(joined.gap).toBe(true);
    }, 30_000);
  },
);

describe.skipIf(skip !== undefined)(
  `auth service beside a relay buffer on a small disk${skip ? `: skipped, ${skip}` : ''}`,
  () => {
    beforeAll(async () => {
      await chooseSqliteEngine('native', createLogger('silent'));
    });

    /** User 1 with a sender device joined and a second device dropped, in one project's room. */
    async function flooding(h: TestHost) {
      const first = await h.signIn('flood@example.com', 'laptop');
      const second = await h.signIn('flood@example.com', 'phone');
      const { roomId } = await registerProject(h.base, first.deviceToken, 'flood');
      const sender = await joinRelay(h.relayUrl, roomId, first.deviceId, first.deviceToken);
      const away = await joinRelay(h.relayUrl, roomId, second.deviceId, second.deviceToken);
      away.socket.terminate();
      await away.closed;
      return (count: number) => {
        for (let n = 0; n < count; n++) {
          sender.socket.send(JSON.stringify({ to: 'broadcast', payload: big(n) }));
        }
      };
    }

    it('keeps signing users in while the buffer, on the same disk, is held at buffer.maxBytes', async () => {
      disk = mountDisk(2048);
      host = await startTestHost({
        auth: [`DATA_DIR=${disk.dir}`],
        relay: ['buffer.maxBytes=524288', 'rate.perSecond=10000', 'rate.burst=10000'],
      });
      const status = host.host.urls.status ?? '';
      const send = await flooding(host);
      // 3 MiB of frames for a 2 MiB disk
      send(96);
      await eventually(async () => {
        const m = await metricsOf(status);
        return (
          m.get('relay_messages_buffered_total') === 96 &&
          m.get('relay_buffer_pending_messages') === 0
        );
      }, 'every broadcast routed and committed');
      const someone = await host.signIn('after@example.com');
      const res = await fetch(`${host.base}/auth/device`, {
        headers: { Authorization: `Bearer ${someone.deviceToken}` },
      });
      expect(res.status).toBe(200);
      expect(await health(status)).toBe(200);
      const m = await metricsOf(status);
      expect(m.get('relay_messages_dropped_total{reason="buffer_bound"}')).toBeGreaterThan(0);
      expect(m.get('relay_buffer_write_failures_total')).toBe(0);
    }, 30_000);

    it('keeps the auth service serving when the relay buffer on its own disk fails to write', async () => {
      disk = mountDisk(2048);
      host = await startTestHost({
        relay: [
          `sqlite.path=${join(disk.dir, 'relay.db')}`,
          'rate.perSecond=10000',
          'rate.burst=10000',
        ],
      });
      const status = host.host.urls.status ?? '';
      const send = await flooding(host);
      disk.fill();
      send(8);
      await eventually(async () => (await health(status)) === 503, 'relay /health 503');
      expect((await fetch(`${host.base}/health`)).status).toBe(200);
      const someone = await host.signIn('during@example.com');
      const res = await fetch(`${host.base}/auth/device`, {
        headers: { Authorization: `Bearer ${someone.deviceToken}` },
      });
      expect(res.status).toBe(200);
    }, 30_000);
  },
);
