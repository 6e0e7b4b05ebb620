import { afterEach, describe, expect, it } from 'vitest';
import { maxReportBytes, maxReportsPerRoom, reportBytes } from '../../protocol/relay-frames.ts';
import type { RelayConfig } from '../../server/config/relay-config.ts';
import { createLogger } from '../../server/log.ts';
import type { StoreBounds } from '../../server/store/document-store.ts';
import { openPostgresStore } from '../../server/store/postgres-store.ts';
import { dbTargets } from '../helpers/databases.ts';
import { metricAt as metric } from '../helpers/metrics.ts';
import type { Frame } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { putChunk } from '../helpers/store-client.ts';

/**
 * Folder reports through the relay count against the store's bounds like documents and chunks:
 * a user at `store.userMaxBytes` cannot make the host keep more by sending reports under new
 * folder names, a report is bounded in size, a project in its number of folders, and a refused
 * report is answered `store_full` and changes nothing (`sync_host_store_bytes` included). On
 * store.db and on the cluster's PostgreSQL store.
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const postgresSkip = postgres === undefined ? 'no PostgreSQL target' : postgres.skip;

let harness: RelayHarness | undefined;
let database: { drop(): Promise<void> } | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await database?.drop();
  database = undefined;
});

async function onSqlite(bounds: StoreBounds): Promise<RelayHarness> {
  const config: Partial<RelayConfig> = {
    storeUserMaxBytes: bounds.userMaxBytes,
    storeMaxBytes: bounds.maxBytes,
  };
  return startRelayHarness({ config });
}

async function onPostgres(bounds: StoreBounds): Promise<RelayHarness> {
  const created = await postgres?.create('');
  database = created;
  const config = created?.config;
  if (config?.driver !== 'postgres') throw new Error('no PostgreSQL database');
  const store = openPostgresStore({
    url: `postgres://${config.user}@${config.host}:${config.port}/${config.database}`,
    bounds,
    history: { keepMs: 30 * 24 * 3_600_000, stepMs: 600_000 },
    logger: createLogger('silent'),
  });
  await store.ready();
  return startRelayHarness({ store });
}

const names = (n: number, prefix = 'photos/') =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, '0')}.jpg`);

function report(doc: string, list: string[]) {
  return {
    type: 'folder-report',
    doc,
    files: list.length,
    bytes: 1000,
    encrypted: false,
    names: list,
  };
}

/** The `store_full` errors received so far that answer a report: neither `doc` nor `ref`. */
async function refusals(
  client: { sync(): Promise<void>; take(m: (f: Frame) => boolean, ms?: number): Promise<Frame> },
  n: number,
): Promise<Frame[]> {
  await client.sync();
  const found: Frame[] = [];
  for (let i = 0; i < n; i++) {
    found.push(await client.take((f) => f.type === 'error' && f.code === 'store_full'));
  }
  return found;
}

const stores = [
  ['store.db', onSqlite, undefined],
  ['PostgreSQL', onPostgres, postgresSkip],
] as const;

for (const [name, start, skip] of stores) {
  describe.skipIf(skip !== undefined)(`folder reports within the store's bounds: ${name}`, () => {
    it('a user at store.userMaxBytes cannot store reports under new folder names; the count stays', async () => {
      harness = await start({ userMaxBytes: 20_000, maxBytes: 1 << 30 });
      const room = harness.room(1);
      const { client } = await harness.joined(room, 1, 1);
      // The user's share taken by a chunk, all but a little.
      expect(await putChunk(client, 1, Buffer.alloc(19_000, 1))).toMatchObject({
        type: 'chunk-stored',
      });
      const before = await metric(harness.statusUrl, 'sync_host_store_bytes');
      for (let i = 0; i < 10; i++) client.send(report(`folder-${i}`, names(200)));
      const refused = await refusals(client, 10);
      for (const frame of refused) {
        expect(frame).not.toHaveProperty('doc');
        expect(frame).not.toHaveProperty('ref');
        expect(frame.message).toContain('store.userMaxBytes');
      }
      expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(before);
      expect(await metric(harness.statusUrl, 'sync_host_store_reports_refused_total')).toBe(10);
      const usage = await harness.relay.store?.usage();
      expect(usage?.rooms.flatMap((r) => r.folders)).toEqual([]);
      expect(usage?.bytes).toBe(before);
      // A small report fits what is left, and is counted.
      client.send(report('folder', ['a.txt']));
      await client.sync();
      const small = reportBytes({ doc: 'folder', device: '1', names: ['a.txt'] });
      expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(before + small);
    });

    it('keeps one report per folder, replacing it, at most a fixed number of folders per project', async () => {
      harness = await start({ userMaxBytes: 1 << 30, maxBytes: 1 << 30 });
      const room = harness.room(1);
      const { client } = await harness.joined(room, 1, 1);
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < maxReportsPerRoom; i++) client.send(report(`f${i}`, names(100)));
      }
      await client.sync();
      const kept = await metric(harness.statusUrl, 'sync_host_store_bytes');
      expect(kept).toBe(
        Array.from({ length: maxReportsPerRoom }, (_, i) =>
          reportBytes({ doc: `f${i}`, device: '1', names: names(100) }),
        ).reduce((a, b) => a + b, 0),
      );
      client.send(report('one more', ['a.txt']));
      const [refused] = await refusals(client, 1);
      expect(refused?.message).toContain(`${maxReportsPerRoom} folders`);
      expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(kept);
      const usage = await harness.relay.store?.usage();
      expect(usage?.rooms[0]?.folders).toHaveLength(maxReportsPerRoom);
      expect(usage?.rooms[0]?.folders[0]).toMatchObject({ named: 100 });
      expect(usage?.bytes).toBe(kept);
    });

    it('refuses a report over the size bound and keeps the one before it', async () => {
      harness = await start({ userMaxBytes: 1 << 30, maxBytes: 1 << 30 });
      const room = harness.room(1);
      const { client } = await harness.joined(room, 1, 1);
      client.send(report('folder', ['a.txt']));
      await client.sync();
      const before = await metric(harness.statusUrl, 'sync_host_store_bytes');
      // 2000 names of 200 characters: within the frame's shape, over the report's bound.
      const long = names(2000, `${'deep/'.repeat(38)}x`);
      expect(reportBytes({ doc: 'folder', device: '1', names: long })).toBeGreaterThan(
        maxReportBytes,
      );
      client.send(report('folder', long));
      const [refused] = await refusals(client, 1);
      expect(refused?.message).toContain(String(maxReportBytes));
      expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(before);
      expect(await harness.relay.store?.chunks.reportNames(room, 'folder')).toEqual(['a.txt']);
    });
  });
}
