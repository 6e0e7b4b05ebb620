import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { DbConfig } from '../../server/config/auth-config.ts';

/**
 * The database targets every database suite runs against. PostgreSQL and MariaDB come from
 * the machine's services (127.0.0.1:5432 user postgres; 127.0.0.1:3306 root); each run gets a
 * fresh database named `synchost_<random>` that is dropped after. A server that cannot be
 * reached is reported as skipped with the reason, unless REQUIRE_DATABASES=1 (set by CI),
 * which turns the skip into a failure.
 */
export interface DbTarget {
  name: 'sqlite' | 'sqlite-wasm' | 'postgres' | 'mysql';
  /** Why this target is skipped; undefined when it is available. */
  skip?: string;
  /** A fresh, empty database for one test file; `drop` removes it. */
  create(
    dir: string,
  ): Promise<{ config: DbConfig; sqliteEngine?: 'native' | 'wasm'; drop(): Promise<void> }>;
}

const pgBase = {
  host: process.env.PGHOST_TEST ?? '127.0.0.1',
  port: 5432,
  user: 'postgres',
  password: '',
};
const myBase = {
  host: process.env.MYSQL_HOST_TEST ?? '127.0.0.1',
  port: 3306,
  user: 'root',
  password: '',
};

const freshName = () => `synchost_${process.pid}_${randomBytes(4).toString('hex')}`;

async function pgAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ ...pgBase, database: 'test', connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function myAdmin<T>(fn: (conn: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection({ ...myBase, connectTimeout: 3_000 });
  try {
    return await fn(conn);
  } finally {
    await conn.end();
  }
}

async function reason(probe: () => Promise<unknown>, what: string): Promise<string | undefined> {
  try {
    await probe();
    return undefined;
  } catch (err: unknown) {
    const why = `${what} not reachable (${err instanceof Error ? err.message : String(err)})`;
    if (process.env.REQUIRE_DATABASES === '1') throw new Error(`REQUIRE_DATABASES=1 but ${why}`);
    return why;
  }
}

/** Probes the servers once; call at the top of a test file (top-level await). */
export async function dbTargets(): Promise<DbTarget[]> {
  const [pgSkip, mySkip] = await Promise.all([
    reason(() => pgAdmin((c) => c.query('select 1')), 'PostgreSQL at 127.0.0.1:5432'),
    reason(() => myAdmin((c) => c.query('select 1')), 'MariaDB/MySQL at 127.0.0.1:3306'),
  ]);
  return [
    {
      name: 'sqlite',
      create: async (dir) => ({
        config: { driver: 'sqlite', path: `${dir}/auth.db` },
        sqliteEngine: 'native',
        drop: async () => {},
      }),
    },
    {
      name: 'sqlite-wasm',
      create: async (dir) => ({
        config: { driver: 'sqlite', path: `${dir}/auth.db` },
        sqliteEngine: 'wasm',
        drop: async () => {},
      }),
    },
    {
      name: 'postgres',
      skip: pgSkip,
      async create() {
        const database = freshName();
        await pgAdmin((c) => c.query(`create database ${database}`));
        return {
          config: { driver: 'postgres', ...pgBase, database },
          drop: () =>
            pgAdmin((c) => c.query(`drop database if exists ${database} with (force)`)).then(
              () => {},
            ),
        };
      },
    },
    {
      name: 'mysql',
      skip: mySkip,
      async create() {
        const database = freshName();
        await myAdmin((c) => c.query(`create database ${database} character set utf8mb4`));
        return {
          config: { driver: 'mysql', ...myBase, database },
          drop: () => myAdmin((c) => c.query(`drop database if exists ${database}`)).then(() => {}),
        };
      },
    },
  ];
}
