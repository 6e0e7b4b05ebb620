import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import { entryBytes, type NewEntry, type StoreBounds } from '../../server/store/document-store.ts';
import {
  openPostgresStore,
  type PostgresDocumentStore,
} from '../../server/store/postgres-store.ts';
import { dbTargets } from '../helpers/databases.ts';

/**
 * What the cluster store adds to the contract (store-contract.test.ts): several nodes writing
 * to one database at once. Two stores on one fresh database stand for two relay nodes.
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const roomy: StoreBounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };
const history = { keepMs: 30 * 24 * 3_600_000, stepMs: 600_000 };
const room = '3.00000000000000000000000000000003.00000000000000000000000000000003';

const entry = (doc: string, text: string): NewEntry => ({
  room,
  doc,
  device: '5',
  data: Buffer.from(text),
});

describe.skipIf(postgres?.skip !== undefined)(
  `the PostgreSQL document store shared by nodes${postgres?.skip ? ` (skipped: ${postgres.skip})` : ''}`,
  () => {
    const stores: PostgresDocumentStore[] = [];
    let drop: (() => Promise<void>) | undefined;

    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
      await drop?.();
    });

    async function nodes(count: number, bounds = roomy): Promise<PostgresDocumentStore[]> {
      const database = await postgres?.create('');
      if (database?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      drop = database.drop;
      const { user, host, port, database: name } = database.config;
      const url = `postgres://${user}@${host}:${port}/${name}`;
      for (let i = 0; i < count; i++) {
        stores.push(openPostgresStore({ url, bounds, history, logger: createLogger('silent') }));
      }
      // Started together: the tables are created once, under the schema lock.
      await Promise.all(stores.map((s) => s.ready()));
      return stores;
    }

    it('gives each position once when two nodes append to the same documents at once, in opposite orders', async () => {
      const [a, b] = await nodes(2);
      if (a === undefined || b === undefined) throw new Error('no stores');
      const rounds = 30;
      const appends: Array<Promise<unknown>> = [];
      for (let i = 0; i < rounds; i++) {
        // One turn: node A writes x then y, node B y then x (their locks would cross).
        appends.push(a.append(entry('x.md', `a${i}`)), a.append(entry('y.md', `a${i}`)));
        appends.push(b.append(entry('y.md', `b${i}`)), b.append(entry('x.md', `b${i}`)));
        if (i % 3 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      const outcomes = (await Promise.all(appends)) as Array<{ pos: number }>;
      expect(outcomes.every((o) => 'pos' in o)).toBe(true);
      for (const doc of ['x.md', 'y.md']) {
        const page = await a.read(room, doc, 0, 1 << 20);
        expect(page.entries.map((e) => e.pos)).toEqual(
          Array.from({ length: 2 * rounds }, (_, i) => i + 1),
        );
        expect(page.lastPos).toBe(2 * rounds);
        // Each node's own appends keep their order.
        const ofA = page.entries.map((e) => e.data.toString()).filter((t) => t.startsWith('a'));
        expect(ofA).toEqual(Array.from({ length: rounds }, (_, i) => `a${i}`));
      }
      const usage = await b.usage();
      expect(usage.rooms).toEqual([
        {
          room,
          user: '3',
          documents: 2,
          bytes: usage.bytes,
          chunks: 0,
          chunkBytes: 0,
          reportBytes: 0,
          folders: [],
        },
      ]);
      const written = ['a', 'b'].flatMap((node) =>
        Array.from({ length: rounds }, (_, i) => 2 * entryBytes(entry('x.md', `${node}${i}`))),
      );
      expect(usage.bytes).toBe(written.reduce((sum, bytes) => sum + bytes, 0));
    });

    it('holds the user bound across nodes', async () => {
      const size = 100 + 64 + 1;
      const [a, b] = await nodes(2, { userMaxBytes: 5 * size, maxBytes: 1 << 30 });
      if (a === undefined || b === undefined) throw new Error('no stores');
      const one = (doc: string) => entry(doc, 'x'.repeat(100));
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).append(one(`d${i % 3}.md`))),
      );
      expect(outcomes.filter((o) => 'pos' in o)).toHaveLength(5);
      expect(outcomes.filter((o) => 'full' in o)).toEqual(
        Array.from({ length: 3 }, () => ({ full: 'user' })),
      );
      expect((await a.usage()).bytes).toBe(5 * size);
    });
  },
);
