import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { reportBytes } from '../../protocol/relay-frames.ts';
import { openSqliteStore } from '../../server/store/sqlite-store.ts';
import { history } from '../helpers/store-factories.ts';

/**
 * A store.db written before the folder reports were counted (no `counted` column) gets the
 * column at open, each report counted from its row as a new one would be, so the bounds and
 * `sync_host_store_bytes` cover them at once.
 */

const room = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const bounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };

describe('store.db folder reports from before they were counted', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('counts them at open, names in any script, and forgets them with their room', async () => {
    dir = mkdtempSync(join(tmpdir(), 'report-column-'));
    const path = join(dir, 'store.db');
    const open = () => openSqliteStore({ path, bounds, history, now: () => 1_000 });
    await open().close();
    // The table as the versions before the count had it, with two reports.
    const db = new Database(path);
    db.exec(`DROP TABLE folderReports; CREATE TABLE folderReports (
      room TEXT NOT NULL, doc TEXT NOT NULL, user TEXT NOT NULL, device TEXT NOT NULL,
      files INTEGER NOT NULL, bytes INTEGER NOT NULL, encrypted INTEGER NOT NULL, names TEXT,
      at INTEGER NOT NULL, PRIMARY KEY (room, doc)); PRAGMA user_version = 2`);
    const names = ['a.txt', 'fotos/été/日本.jpg'];
    const insert = db.prepare('INSERT INTO folderReports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    insert.run(room, 'folder', '1', '7', 2, 10, 0, JSON.stringify(names), 1);
    insert.run(room, 'hsealed', '1', '7', 2, 10, 1, null, 1);
    db.close();

    const store = open();
    // Past layout 2: a sync-host of the version before refuses the file from now on, instead
    // of storing reports it would not count.
    const layout = new Database(path, { readonly: true });
    expect(layout.pragma('user_version', { simple: true })).toBeGreaterThan(2);
    layout.close();
    const counted =
      reportBytes({ doc: 'folder', device: '7', names }) +
      reportBytes({ doc: 'hsealed', device: '7' });
    expect(store.bytes()).toBe(counted);
    expect((await store.usage()).rooms[0]).toMatchObject({ reportBytes: counted, bytes: counted });
    expect(await store.chunks.reportNames(room, 'folder')).toEqual(names);
    await store.deleteRoom(room);
    expect(store.bytes()).toBe(0);
    await store.close();
  });
});
