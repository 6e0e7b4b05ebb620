import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import { storeSchemaVersion } from '../../server/store/postgres-schema.ts';
import {
  openPostgresStore,
  type PostgresDocumentStore,
} from '../../server/store/postgres-store.ts';
import { dbTargets } from '../helpers/databases.ts';
import { history } from '../helpers/store-factories.ts';

/**
 * The cluster store's layout version: a database written by the version before folder reports
 * were counted is brought to the current layout at the first start (the uncounted reports
 * dropped, to be sent again), and a database at a newer layout is refused and left untouched.
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const bounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };
const room = '4.00000000000000000000000000000004.00000000000000000000000000000004';

describe.skipIf(postgres?.skip !== undefined)(
  `the PostgreSQL store's layout version${postgres?.skip ? ` (skipped: ${postgres.skip})` : ''}`,
  () => {
    let drop: (() => Promise<void>) | undefined;
    const stores: PostgresDocumentStore[] = [];
    const clients: pg.Client[] = [];

    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
      await Promise.all(clients.splice(0).map((c) => c.end()));
      await drop?.();
    });

    async function database(): Promise<{ url: string; sql: pg.Client }> {
      const created = await postgres?.create('');
      if (created?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      drop = created.drop;
      const { user, host, port, database: name } = created.config;
      const url = `postgres://${user}@${host}:${port}/${name}`;
      const sql = new pg.Client({ connectionString: url });
      await sql.connect();
      clients.push(sql);
      return { url, sql };
    }

    function open(url: string): PostgresDocumentStore {
      const store = openPostgresStore({ url, bounds, history, logger: createLogger('silent') });
      stores.push(store);
      return store;
    }

    async function version(sql: pg.Client): Promise<number> {
      return (await sql.query('SELECT version FROM store_version')).rows[0].version;
    }

    it('brings a layout-2 database to the current layout, dropping the reports it never counted', async () => {
      const { url, sql } = await database();
      await open(url).ready();
      // The tables as version 2 left them: no `counted`, one report kept.
      await sql.query('ALTER TABLE store_folder_reports DROP COLUMN counted');
      await sql.query('UPDATE store_version SET version = 2');
      await sql.query(
        `INSERT INTO store_folder_reports (room, doc, user_id, device, files, bytes, encrypted, at)
         VALUES ($1, 'folder', '4', '7', 3, 30, false, 1)`,
        [room],
      );
      await Promise.all(stores.splice(0).map((s) => s.close()));

      const store = open(url);
      await store.ready();
      // Past 2: a node of the version before refuses the database instead of writing reports
      // it does not count.
      expect(await version(sql)).toBe(storeSchemaVersion);
      expect(storeSchemaVersion).toBeGreaterThan(2);
      expect(
        (await sql.query('SELECT count(*)::int AS n FROM store_folder_reports')).rows[0].n,
      ).toBe(0);
      expect(store.bytes()).toBe(0);
    });

    it('refuses a database at a newer layout and changes nothing in it', async () => {
      const { url, sql } = await database();
      await open(url).ready();
      await Promise.all(stores.splice(0).map((s) => s.close()));
      await sql.query('UPDATE store_version SET version = $1', [storeSchemaVersion + 1]);

      await expect(open(url).ready()).rejects.toThrow(/newer than this relay's/);
      expect(await version(sql)).toBe(storeSchemaVersion + 1);
    });
  },
);
