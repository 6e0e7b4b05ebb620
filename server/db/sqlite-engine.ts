import type BetterSqlite3 from 'better-sqlite3';
import initSqlJs from 'sql.js';
import type { Logger } from '../log.ts';
import { requireBetterSqlite3, sqlJsOptions } from './better-sqlite3.ts';
import { readSqliteImage, writeSqliteImage } from './sqljs-database.ts';

/** `native`: better-sqlite3 (compiled addon); `wasm`: sql.js (SQLite in WebAssembly). */
export type SqliteEngine = 'native' | 'wasm';

/** Error thrown by the native module when its binary cannot load on this runtime or platform. */
export function isNativeLoadFailure(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  return (
    code === 'ERR_DLOPEN_FAILED' ||
    code === 'MODULE_NOT_FOUND' ||
    /bindings file|NODE_MODULE_VERSION|invalid ELF|wrong ELF class|cannot open shared object|was compiled against a different/i.test(
      message,
    )
  );
}

let native: { module?: typeof BetterSqlite3; failure?: string } | undefined;

/**
 * better-sqlite3, loaded once per process; `failure` says why when it is not installed (it is an
 * optional dependency) or its addon cannot load here.
 */
export function loadNativeSqlite(): { module?: typeof BetterSqlite3; failure?: string } {
  if (native !== undefined) return native;
  try {
    // Opening a database loads the addon itself (the package's import alone does not).
    const module = requireBetterSqlite3();
    new module(':memory:').close();
    native = { module };
  } catch (err: unknown) {
    if (!isNativeLoadFailure(err)) throw err;
    native = { failure: err instanceof Error ? err.message.split('\n')[0] : String(err) };
  }
  return native;
}

type SqlJs = Awaited<ReturnType<typeof initSqlJs>>;

/** The engine `openSyncSqlite` uses, as chosen at start; sql.js once loaded. */
let current: SqliteEngine = 'native';
let sqlJs: SqlJs | undefined;

/**
 * Picks the SQLite engine of this process: better-sqlite3 unless `preference` is `wasm` or its
 * addon cannot load, else sql.js (loaded here: it starts asynchronously). The fallback is
 * announced in one warning line saying what it costs.
 */
export async function chooseSqliteEngine(
  preference: SqliteEngine | undefined,
  logger: Logger,
): Promise<SqliteEngine> {
  const failure = preference === 'wasm' ? undefined : loadNativeSqlite().failure;
  if (preference !== 'wasm' && failure === undefined) {
    current = 'native';
    return current;
  }
  sqlJs ??= await initSqlJs(sqlJsOptions());
  current = 'wasm';
  const why =
    failure === undefined
      ? 'chosen by SYNC_HOST_SQLITE_ENGINE=wasm'
      : `better-sqlite3 cannot load here: ${failure}`;
  logger.warn(
    `SQLite engine: sql.js (WebAssembly; ${why}): every commit of the auth database and the relay buffer rewrites its whole file (slower writes under load, no WAL)`,
  );
  return current;
}

/**
 * Opens a SQLite file synchronously on the chosen engine, with better-sqlite3's API (on sql.js,
 * the part of it the relay buffer uses: prepare with run/get/all/iterate/pluck, exec, pragma,
 * transaction, close). better-sqlite3 until `chooseSqliteEngine` picked sql.js.
 */
export function openSyncSqlite(path: string): BetterSqlite3.Database {
  if (current === 'native' || sqlJs === undefined) {
    const { module, failure } = loadNativeSqlite();
    if (module === undefined) throw new Error(`better-sqlite3 cannot load here (${failure})`);
    return new module(path);
  }
  return openSqlJsSync(path, sqlJs) as unknown as BetterSqlite3.Database;
}
type Row = Record<string, unknown>;

/**
 * sql.js committed a transaction in memory but could not write the file (a full or read-only
 * disk): the change is kept and written with the next successful write, or lost at a crash.
 */
export class SqliteImageWriteError extends Error {
  /** The transaction took effect (in memory). */
  readonly committedInMemory = true;
  readonly code: string | undefined;
  constructor(path: string, cause: unknown) {
    const code = (cause as NodeJS.ErrnoException | null)?.code;
    super(`cannot write ${path} (${code ?? String(cause)})`, { cause });
    this.name = 'SqliteImageWriteError';
    this.code = code;
  }
}
type Param = number | string | Uint8Array | null;

const toParams = (args: unknown[]): Param[] =>
  args.map((a) => (a === undefined ? null : typeof a === 'bigint' ? Number(a) : (a as Param)));

/**
 * A better-sqlite3-shaped database on sql.js. The database lives in memory; every committed
 * write goes to the file as a whole image (written aside, fsync'ed, renamed over the file).
 */
function openSqlJsSync(path: string, SQL: SqlJs) {
  const db = new SQL.Database(readSqliteImage(path));
  let depth = 0;
  const persist = () => {
    if (depth === 0) writeSqliteImage(path, db.export());
  };
  const rows = (sql: string, args: unknown[]): Row[] => {
    const stmt = db.prepare(sql);
    try {
      stmt.bind(toParams(args));
      const out: Row[] = [];
      while (stmt.step()) out.push(stmt.getAsObject() as Row);
      return out;
    } finally {
      stmt.free();
    }
  };
  const statement = (sql: string, plucked = false) => {
    const shape = (row: Row | undefined) =>
      plucked && row !== undefined ? Object.values(row)[0] : row;
    return {
      run(...args: unknown[]) {
        db.run(sql, toParams(args));
        const changes = db.getRowsModified();
        const lastInsertRowid = Number(db.exec('SELECT last_insert_rowid()')[0]?.values[0]?.[0]);
        persist();
        return { changes, lastInsertRowid };
      },
      get: (...args: unknown[]) => shape(rows(sql, args)[0]),
      all: (...args: unknown[]) => rows(sql, args).map(shape),
      iterate: (...args: unknown[]) => rows(sql, args).map(shape)[Symbol.iterator](),
      pluck: () => statement(sql, true),
    };
  };
  return {
    prepare: (sql: string) => statement(sql),
    exec(sql: string) {
      db.exec(sql);
      persist();
    },
    /** WAL and synchronous settings concern the native file format only. */
    pragma(setting: string) {
      if (!/^\s*(journal_mode|synchronous)\b/i.test(setting)) db.exec(`PRAGMA ${setting}`);
    },
    transaction<A extends unknown[], R>(fn: (...args: A) => R) {
      return (...args: A): R => {
        const savepoint = `sp${depth}`;
        db.exec(depth === 0 ? 'BEGIN' : `SAVEPOINT ${savepoint}`);
        depth++;
        let result: R;
        try {
          result = fn(...args);
        } catch (err: unknown) {
          depth--;
          db.exec(depth === 0 ? 'ROLLBACK' : `ROLLBACK TO ${savepoint}; RELEASE ${savepoint}`);
          throw err;
        }
        depth--;
        db.exec(depth === 0 ? 'COMMIT' : `RELEASE ${savepoint}`);
        try {
          persist();
        } catch (err: unknown) {
          // The change is committed in memory and goes to the file with the next write that
          // succeeds (or is lost at a crash): the caller learns that the file write failed.
          throw new SqliteImageWriteError(path, err);
        }
        return result;
      };
    },
    close() {
      persist();
      db.close();
    },
  };
}
