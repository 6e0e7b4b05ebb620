import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { keyChecksQuery, openSqliteStore } from '../../server/store/sqlite-store.ts';
import { history } from '../helpers/store-factories.ts';

/**
 * A room's key check values (`keyChecks`, asked by a catch-up with `keys`) come from the index
 * `entriesKeys` of store.db, one look-up per value, never a pass over the room's entries; a
 * store.db written before that index gets it at its next open.
 */

const room = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const bounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };

describe("store.db's index of key check values", () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is made at the open of a store.db without it, and the query reads the entries through it only', async () => {
    dir = mkdtempSync(join(tmpdir(), 'key-checks-'));
    const path = join(dir, 'store.db');
    const open = () => openSqliteStore({ path, bounds, history, now: () => 1_000 });
    let store = open();
    for (const kc of ['b', 'a', undefined, 'b']) {
      await store.append({ room, doc: 'd', device: '1', data: Buffer.from('x'), kc });
    }
    await store.close();
    // As a store.db of an earlier version: no such index.
    const old = new Database(path);
    old.exec('DROP INDEX entriesKeys');
    old.close();

    store = open();
    expect(await store.keyChecks(room)).toEqual(['a', 'b']);
    await store.close();
    const db = new Database(path, { readonly: true });
    const indexes = db
      .prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'entries' AND type = 'index'")
      .pluck()
      .all();
    expect(indexes).toContain('entriesKeys');
    const plan = db
      .prepare<[string], { detail: string }>(`EXPLAIN QUERY PLAN ${keyChecksQuery}`)
      .all(room)
      .map((step) => step.detail);
    db.close();
    const entrySteps = plan.filter((detail) => / e /.test(` ${detail} `));
    expect(entrySteps.length).toBeGreaterThan(0);
    for (const step of entrySteps)
      expect(step).toMatch(/^SEARCH e USING COVERING INDEX entriesKeys/);
  });
});
