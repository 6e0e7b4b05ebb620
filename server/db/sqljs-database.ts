import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import type { SqliteDatabase, SqliteStatement } from 'kysely';
import initSqlJs from 'sql.js';
import { sqlJsOptions } from './better-sqlite3.ts';

type SqlJsDatabase = import('sql.js').Database;
type SqlValue = number | string | Uint8Array | null;

const transactionStart = /^\s*(begin|savepoint)\b/i;
const transactionEnd = /^\s*(commit|end|rollback|release)\b/i;
const readOnly = /^\s*(select|pragma|explain|with\s[^;]*?\bselect\b)/i;

/**
 * The bytes of a SQLite file for sql.js (undefined when there is none yet). A file that
 * better-sqlite3 left in WAL mode is read as a rollback-journal file; one with changes still in
 * its `-wal` file is refused (sql.js cannot read them).
 */
export function readSqliteImage(path: string): Uint8Array | undefined {
  if (existsSync(`${path}-wal`) && statSync(`${path}-wal`).size > 0) {
    throw new Error(
      `${path}-wal holds changes not yet checkpointed; start once with the native SQLite driver (better-sqlite3) to merge them`,
    );
  }
  const bytes = existsSync(path) ? readFileSync(path) : undefined;
  if (bytes !== undefined && bytes.length >= 20 && (bytes[18] === 2 || bytes[19] === 2)) {
    bytes[18] = 1;
    bytes[19] = 1;
  }
  return bytes;
}

/** Writes a database image so the file is always complete: aside, fsync'ed, renamed over it. */
export function writeSqliteImage(path: string, image: Uint8Array): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, image);
    fsyncSync(fd);
  } catch (err: unknown) {
    // A partial image on a full disk would keep holding the space the next write needs.
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
}

/**
 * SQLite compiled to WebAssembly (sql.js), shaped like better-sqlite3 for Kysely's SqliteDialect.
 * The database lives in memory and is written back to the same file after every committed
 * write: the whole image goes to `<file>.tmp`, is fsync'ed and renamed over the file, so the
 * file is always a complete database. That costs a full rewrite per write (fine for the auth
 * service's small tables) and uses a rollback-journal file format instead of WAL.
 */
export async function openSqlJsDatabase(path: string): Promise<SqliteDatabase> {
  const SQL = await initSqlJs(sqlJsOptions());
  const db = new SQL.Database(readSqliteImage(path));
  const pragmas = () => db.run('PRAGMA foreign_keys = ON');
  pragmas();
  let depth = 0;

  const persist = () => {
    const image = db.export();
    pragmas(); // export() reopens the database, resetting pragmas
    writeSqliteImage(path, image);
  };

  const afterStatement = (sql: string) => {
    if (transactionStart.test(sql)) {
      depth++;
      return;
    }
    if (transactionEnd.test(sql)) {
      depth = Math.max(0, depth - 1);
      if (depth === 0) persist();
      return;
    }
    if (depth === 0 && !readOnly.test(sql)) persist();
  };

  persist();
  return {
    close: () => db.close(),
    prepare: (sql: string) => prepare(db, sql, afterStatement),
  };
}

function toSqlValues(parameters: ReadonlyArray<unknown>): SqlValue[] {
  return parameters.map((p) => {
    if (p === undefined || p === null) return null;
    if (typeof p === 'boolean') return p ? 1 : 0;
    if (typeof p === 'bigint') return Number(p);
    if (p instanceof Date) return p.toISOString();
    return p as SqlValue;
  });
}

function prepare(
  db: SqlJsDatabase,
  sql: string,
  afterStatement: (sql: string) => void,
): SqliteStatement {
  const probe = db.prepare(sql);
  const reader = probe.getColumnNames().length > 0;
  probe.free();

  const rows = (parameters: ReadonlyArray<unknown>): unknown[] => {
    const stmt = db.prepare(sql);
    try {
      stmt.bind(toSqlValues(parameters));
      const out: unknown[] = [];
      while (stmt.step()) out.push(stmt.getAsObject());
      return out;
    } finally {
      stmt.free();
      afterStatement(sql);
    }
  };

  return {
    reader,
    all: rows,
    iterate: (parameters) => rows(parameters)[Symbol.iterator]() as IterableIterator<unknown>,
    run: (parameters) => {
      const stmt = db.prepare(sql);
      let changes = 0;
      let lastInsertRowid = 0;
      try {
        stmt.run(toSqlValues(parameters));
        changes = db.getRowsModified();
        const last = db.exec('SELECT last_insert_rowid()')[0]?.values[0]?.[0];
        lastInsertRowid = typeof last === 'number' ? last : 0;
      } finally {
        stmt.free();
      }
      afterStatement(sql);
      return { changes, lastInsertRowid };
    },
  };
}
