import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../server/store/sqlite-store.ts';
import { history } from '../helpers/store-factories.ts';

/**
 * store.db's `chunks` table is a rowid table (twice as fast for rows of 256 KiB); the first files
 * of layout 2 have it WITHOUT ROWID, and opening one rebuilds it, keeping every chunk.
 */

const room = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const bounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };
const idOf = (data: Buffer) => `s${createHash('sha256').update(data).digest('base64url')}`;
const tableSql = (path: string) => {
  const db = new Database(path, { readonly: true });
  const sql = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'chunks'").pluck().get();
  const indexes = db
    .prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'chunks' AND type = 'index'")
    .pluck()
    .all();
  db.close();
  return { sql: String(sql), indexes };
};

describe('store.db chunks table', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('rebuilds a WITHOUT ROWID chunks table at open, keeping its chunks, bytes and indexes', async () => {
    dir = mkdtempSync(join(tmpdir(), 'chunk-rowid-'));
    const path = join(dir, 'store.db');
    const open = () => openSqliteStore({ path, bounds, history, now: () => 1_000 });
    const data = randomBytes(300_000);
    let store = open();
    await store.chunks.put({ room, kc: '', id: idOf(data), data });
    const bytes = store.chunks.bytes();
    await store.close();
    // The table as the first files of layout 2 had it.
    const db = new Database(path);
    const sql = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'chunks'").pluck().get();
    db.exec(`ALTER TABLE chunks RENAME TO old; DROP INDEX chunksByUser; DROP INDEX chunksByUse;
      ${String(sql)} WITHOUT ROWID;
      CREATE INDEX chunksByUser ON chunks (user); CREATE INDEX chunksByUse ON chunks (usedAt);
      INSERT INTO chunks SELECT * FROM old; DROP TABLE old;`);
    db.close();
    expect(tableSql(path).sql).toMatch(/WITHOUT ROWID/);

    store = open();
    expect(await store.chunks.get(room, '', idOf(data))).toEqual(data);
    expect(store.chunks.bytes()).toBe(bytes);
    expect(await store.chunks.have(room, '', [idOf(data)])).toEqual([idOf(data)]);
    await store.close();
    const rebuilt = tableSql(path);
    expect(rebuilt.sql).not.toMatch(/WITHOUT ROWID/);
    expect(rebuilt.indexes).toEqual(expect.arrayContaining(['chunksByUser', 'chunksByUse']));
  });
});
