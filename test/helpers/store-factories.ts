import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import type { DocumentStore, StoreBounds } from '../../server/store/document-store.ts';
import { openPostgresStore } from '../../server/store/postgres-store.ts';
import { openSqliteStore } from '../../server/store/sqlite-store.ts';
import { dbTargets } from './databases.ts';

/**
 * The document stores a contract suite runs against: the single-node one in SQLite, on both
 * SQLite engines (better-sqlite3, and sql.js as when the addon cannot load), and the cluster one
 * in PostgreSQL (a fresh database per test, dropped after; skipped with the reason when
 * PostgreSQL cannot be reached).
 */

export const minuteMs = 60_000;
export const dayMs = 24 * 60 * minuteMs;
export const history = { keepMs: 30 * dayMs, stepMs: 10 * minuteMs };
const roomyBounds: StoreBounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };

export interface StoreSettings {
  bounds?: StoreBounds;
  now: () => number;
}

/** Makes stores for one test; a store made again with `reopen` reads what the last one kept. */
export interface StoreFactory {
  make(settings: StoreSettings): Promise<DocumentStore>;
  /** Closes the current store and opens it again (a restart). */
  reopen(settings: StoreSettings): Promise<DocumentStore>;
  dispose(): Promise<void>;
}

function sqliteFactory(): StoreFactory {
  let dir = '';
  let store: DocumentStore | undefined;
  const open = (settings: StoreSettings) => {
    store = openSqliteStore({
      path: join(dir, 'store.db'),
      bounds: settings.bounds ?? roomyBounds,
      history,
      now: settings.now,
    });
    return store;
  };
  return {
    async make(settings) {
      dir = mkdtempSync(join(tmpdir(), 'store-contract-'));
      return open(settings);
    },
    async reopen(settings) {
      await store?.close();
      return open(settings);
    },
    async dispose() {
      await store?.close();
      store = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');

/** The cluster store on a fresh PostgreSQL database; reopening connects to the same one. */
function postgresFactory(): StoreFactory {
  let store: DocumentStore | undefined;
  let database: Awaited<ReturnType<NonNullable<typeof postgres>['create']>> | undefined;
  const open = async (settings: StoreSettings) => {
    const config = database?.config;
    if (config?.driver !== 'postgres') throw new Error('no PostgreSQL database');
    const opened = openPostgresStore({
      url: `postgres://${config.user}@${config.host}:${config.port}/${config.database}`,
      bounds: settings.bounds ?? roomyBounds,
      history,
      logger: createLogger('silent'),
      now: settings.now,
    });
    store = opened;
    await opened.ready();
    return opened;
  };
  return {
    async make(settings) {
      database = await postgres?.create('');
      return open(settings);
    },
    async reopen(settings) {
      await store?.close();
      return open(settings);
    },
    async dispose() {
      await store?.close();
      store = undefined;
      await database?.drop();
    },
  };
}

/** Each store with what prepares it; the PostgreSQL one is skipped, with the reason, without it. */
export const implementations: Array<
  [string, () => StoreFactory, () => Promise<void>, string | undefined]
> = [
  ['SQLite (better-sqlite3)', sqliteFactory, () => chooseEngine('native'), undefined],
  ['SQLite (sql.js)', sqliteFactory, () => chooseEngine('wasm'), undefined],
  [
    'PostgreSQL (cluster)',
    postgresFactory,
    async () => {},
    postgres === undefined ? 'no PostgreSQL target' : postgres.skip,
  ],
];

async function chooseEngine(engine: 'native' | 'wasm'): Promise<void> {
  await chooseSqliteEngine(engine, createLogger('silent'));
}
