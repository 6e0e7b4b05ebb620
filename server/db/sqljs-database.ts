import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  writeSync,
} from 'node:fs';
import type { SqliteDatabase, SqliteStatement } from 'kysely';
import initSqlJs from 'sql.js';

type SqlJsDatabase = import('sql.js').Database;
type SqlValue = number | string | Uint8Array | null;

const transactionStart = /^\s*(begin|savepoint)\b/i;
const transactionEnd = /^\s*(commit|end|rollback|release)\b/i;
const readOnly = /^\s*(select|pragma|explain|with\s[^;]*?\bselect\b)/i;

/**
 * SQLite compiled to WebAssembly (sql.js), shaped like better-sqlite3 for Kysely's SqliteDialect.
 * The database lives in memory and is written back to the same file after every committed
 * write: the whole image goes to `<file>.tmp`, is fsync'ed and renamed over the file, so the
 * file is always a complete database. That costs a full rewrite per write (fine for the auth
 * service's small tables) and uses a rollback-journal file format instead of WAL.
 */
export async function openSqlJsDatabase(path: string): Promise<SqliteDatabase> {
  const SQL = await initSqlJs();
  if (existsSync(`${path}-wal`) && statSync(`${path}-wal`).size > 0) {
    throw new Error(
      `${path}-wal holds changes not yet checkpointed; start once with the native SQLite driver (better-sqlite3) to merge them`,
    );
  }
  const bytes = existsSync(path) ? readFileSync(path) : undefined;
  if (bytes !== undefined && bytes.length >= 20 && (bytes[18] === 2 || bytes[19] === 2)) {
    // A WAL-mode file written by better-sqlite3: the in-memory engine reads it as a rollback-journal file.
    bytes[18] = 1;
    bytes[19] = 1;
  }
  const db = new SQL.Database(bytes);
  const pragmas = () => db.run('PRAGMA foreign_keys = ON');
  pragmas();
  let depth = 0;

  const persist = () => {
    const image = db.export();
    pragmas(); // export() reopens the database, resetting pragmas
    const tmp = `${path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, image);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
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
