import { accessSync, constants as fsConstants, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  Kysely,
  MysqlDialect,
  PostgresDialect,
  type SqliteDatabase,
  SqliteDialect,
  sql,
} from 'kysely';
import type { DbConfig, DbDriver } from '../config/auth-config.ts';
import type { Logger } from '../log.ts';
import { requireBetterSqlite3 } from './better-sqlite3.ts';
import type { Database } from './schema.ts';
import { isNativeLoadFailure } from './sqlite-engine.ts';
import { openSqlJsDatabase } from './sqljs-database.ts';

type ServerDbConfig = Exclude<DbConfig, { driver: 'sqlite' }>;

export type DbEngine = 'better-sqlite3' | 'sql.js' | 'pg' | 'mysql2';

/** An open database of any driver behind one Kysely instance. */
export interface Db {
  kysely: Kysely<Database>;
  driver: DbDriver;
  engine: DbEngine;
  /** A datetime as this driver stores it (ISO text on SQLite, Date elsewhere). */
  date(value: Date): Date | string;
  /** A boolean as this driver stores it. */
  bool(value: boolean): boolean | number;
  /** Resolves when a trivial query answers within `timeoutMs`, rejects otherwise. */
  ping(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** How long a SQLite write waits for another connection's lock before failing. */
const sqliteBusyTimeoutMs = 5_000;

export interface OpenOptions {
  logger: Logger;
  /** `wasm` forces sql.js (tests, or a platform where the native module is known broken). */
  sqliteEngine?: 'native' | 'wasm' | undefined;
  /** Path of better-sqlite3's compiled addon (better-sqlite3's own `nativeBinding` option). */
  sqliteNativeBinding?: string | undefined;
}

type BetterSqlite3 = typeof import('better-sqlite3');

function loadBetterSqlite3(
  path: string,
  nativeBinding: string | undefined,
): import('better-sqlite3').Database {
  const BetterSqlite: BetterSqlite3 = requireBetterSqlite3();
  return new BetterSqlite(path, nativeBinding === undefined ? {} : { nativeBinding });
}

async function openSqlite(path: string, options: OpenOptions): Promise<Db> {
  try {
    return await openSqliteUnchecked(path, options);
  } catch (err: unknown) {
    throw sqliteOpenError(path, err);
  }
}

/**
 * A database that cannot be opened (read-only or full disk, missing permission) becomes one
 * clear message naming the file, instead of SQLite's bare "unable to open database file".
 */
function sqliteOpenError(path: string, err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === undefined || !/^(SQLITE_|E[A-Z]+$)/.test(code)) return err;
  let reason = err.message;
  try {
    accessSync(dirname(path), fsConstants.W_OK);
  } catch (access: unknown) {
    const why = (access as NodeJS.ErrnoException).code ?? 'error';
    reason = `its folder is not writable (${why === 'EROFS' ? 'read-only file system' : why}): ${err.message}`;
  }
  return Object.assign(new Error(`cannot open the SQLite database ${path}: ${reason}`), { code });
}

async function openSqliteUnchecked(path: string, options: OpenOptions): Promise<Db> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let engine: DbEngine = 'better-sqlite3';
  let dialect: SqliteDialect;
  let native: import('better-sqlite3').Database | undefined;
  if (options.sqliteEngine !== 'wasm') {
    try {
      native = loadBetterSqlite3(path, options.sqliteNativeBinding);
    } catch (err: unknown) {
      if (!isNativeLoadFailure(err)) throw err;
      options.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'better-sqlite3 native module cannot load here; falling back to sql.js (WebAssembly): every write rewrites the whole file, no WAL',
      );
    }
  }
  if (native !== undefined) {
    native.pragma('journal_mode = WAL');
    native.pragma('synchronous = FULL');
    native.pragma('foreign_keys = ON');
    native.pragma(`busy_timeout = ${sqliteBusyTimeoutMs}`);
    dialect = new SqliteDialect({ database: tolerateLostTransaction(cacheStatements(native)) });
  } else {
    engine = 'sql.js';
    const database = await openSqlJsDatabase(path);
    dialect = new SqliteDialect({ database: tolerateLostTransaction(database) });
  }
  const kysely = new Kysely<Database>({ dialect });
  return {
    kysely,
    driver: 'sqlite',
    engine,
    date: (value) => value.toISOString(),
    bool: (value) => (value ? 1 : 0),
    ping: (timeoutMs) => ping(kysely, timeoutMs),
    close: () => kysely.destroy(),
  };
}

/**
 * After SQLITE_FULL or an I/O error SQLite may already have rolled the transaction back by
 * itself (and sql.js may fail to write the image after its COMMIT). Kysely then sends its own
 * ROLLBACK, which fails with "no transaction is active" and would replace the real error (a 500
 * instead of 503 `unavailable`); that ROLLBACK is a no-op instead.
 */
/** Prepared statements kept per SQL text; bounded so a stream of distinct texts cannot grow it. */
const maxCachedStatements = 256;

/**
 * Kysely prepares every query anew; better-sqlite3 statements can be reused, which saves the
 * SQL parse of each request (about 5% of a bearer-authenticated request's CPU). Only for the
 * native engine: sql.js frees its statements whenever it writes the file.
 */
function cacheStatements(database: SqliteDatabase): SqliteDatabase {
  const statements = new Map<string, ReturnType<SqliteDatabase['prepare']>>();
  return {
    close: () => database.close(),
    prepare(text) {
      let statement = statements.get(text);
      if (statement === undefined) {
        if (statements.size >= maxCachedStatements) statements.clear();
        statement = database.prepare(text);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

function tolerateLostTransaction(database: SqliteDatabase): SqliteDatabase {
  return {
    close: () => database.close(),
    prepare(text) {
      const statement = database.prepare(text);
      if (!/^\s*rollback\s*;?\s*$/i.test(text)) return statement;
      return {
        reader: statement.reader,
        all: (parameters) => statement.all(parameters),
        iterate: (parameters) => statement.iterate(parameters),
        run(parameters) {
          try {
            return statement.run(parameters);
          } catch (err: unknown) {
            if (err instanceof Error && /no transaction is active/i.test(err.message))
              return { changes: 0, lastInsertRowid: 0 };
            throw err;
          }
        },
      };
    },
  };
}

async function ping(kysely: Kysely<Database>, timeoutMs = 2_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('database unavailable: ping timed out')), timeoutMs);
  });
  try {
    await Promise.race([sql`select 1`.execute(kysely), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function openPostgres(config: ServerDbConfig, options: OpenOptions): Promise<Db> {
  const { Pool } = (await import('pg')).default;
  const pool = new Pool({
    host: config.host,
    port: config.port,
    user: config.user,
    password: config.password,
    database: config.database,
    max: 10,
    connectionTimeoutMillis: 3_000,
    idleTimeoutMillis: 30_000,
    query_timeout: 10_000,
  });
  // An idle client whose backend was terminated emits here; without a listener it would crash.
  pool.on('error', (err) => options.logger.warn({ err: err.message }, 'postgres connection lost'));
  // A client whose backend dies while checked out emits on itself; the query fails with 503.
  pool.on('connect', (client) => {
    client.on('error', (err) =>
      options.logger.warn({ err: err.message }, 'postgres connection lost'),
    );
  });
  return serverDb(
    new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
    'postgres',
    'pg',
  );
}

/** PostgreSQL and MySQL drivers take Date and boolean values as they are. */
function serverDb(kysely: Kysely<Database>, driver: 'postgres' | 'mysql', engine: DbEngine): Db {
  return {
    kysely,
    driver,
    engine,
    date: (value) => value,
    bool: (value) => value,
    ping: (timeoutMs) => ping(kysely, timeoutMs),
    close: () => kysely.destroy(),
  };
}

async function openMysql(config: ServerDbConfig, options: OpenOptions): Promise<Db> {
  const { createPool } = await import('mysql2');
  const pool = createPool({
    host: config.host,
    port: config.port,
    user: config.user,
    password: config.password,
    database: config.database,
    connectionLimit: 10,
    connectTimeout: 3_000,
    timezone: 'Z',
    charset: 'utf8mb4',
    supportBigNumbers: true,
  });
  pool.on('connection', (connection) => {
    connection.on('error', (err) =>
      options.logger.warn({ err: err.message }, 'mysql connection lost'),
    );
    // CURRENT_TIMESTAMP defaults in UTC, like the Date values mysql2 writes with timezone 'Z'.
    connection.query("SET time_zone = '+00:00'");
  });
  return serverDb(new Kysely<Database>({ dialect: new MysqlDialect({ pool }) }), 'mysql', 'mysql2');
}

/** Opens the configured database. Tables are created by `migrate`, not here. */
export function openDatabase(config: DbConfig, options: OpenOptions): Promise<Db> {
  switch (config.driver) {
    case 'sqlite':
      return openSqlite(config.path, options);
    case 'postgres':
      return openPostgres(config, options);
    case 'mysql':
      return openMysql(config, options);
  }
}
