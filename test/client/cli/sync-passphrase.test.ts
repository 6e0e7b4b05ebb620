import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { eventually, withDeadline } from '../../helpers/wait.ts';
import { cliDevices, stop } from './cli-devices.ts';

/**
 * A device whose passphrase is not the project's, with real `sync` processes and a real host:
 * its first `sync --encrypt` checks the passphrase before anything else, says so in one line
 * and exits (code 3, no restart by a service); the host's store (every row, every chunk file)
 * and the other device's folder stay byte for byte as they were, and its own folder gets no
 * file, not even the marker. With the right passphrase it then syncs.
 */

const { spawnCli, tempDir, setUp, confirmed } = cliDevices('sync-passphrase');

/**
 * Every row of store.db and every chunk file, as one string; but when a chunk was last asked
 * about (`usedAt`: the other device asks at each connection) and the folder reports (what each
 * running device last said of its folder, for the admin UI: the device with the right
 * passphrase runs meanwhile and reports when it likes).
 */
function storeImage(hostDir: string): string {
  const files = readdirSync(hostDir, { recursive: true, encoding: 'utf8' });
  const storePath = join(hostDir, files.find((name) => name.endsWith('store.db'))!);
  const db = new Database(storePath, { readonly: true });
  const tables = db
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    )
    .all();
  const rows = tables
    .filter(({ name }) => name !== 'folderReports')
    .map(({ name }) => [
      name,
      db
        .prepare(`SELECT * FROM "${name}" ORDER BY rowid`)
        .all()
        .map((row) => ({ ...(row as object), usedAt: undefined })),
    ]);
  db.close();
  const chunkFiles = files
    .filter((name) => name.includes('chunks/') && statSync(join(hostDir, name)).isFile())
    .sort()
    .map((name) => [name, readFileSync(join(hostDir, name)).toString('hex')]);
  return JSON.stringify({ rows, chunkFiles }, (_, value: unknown) =>
    value instanceof Uint8Array ? Buffer.from(value).toString('hex') : value,
  );
}

/** A folder's names and bytes (dot files included). */
function folderImage(dir: string): string {
  const names = readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
  return JSON.stringify(
    names.map((name) => {
      const path = join(dir, name);
      return [name, statSync(path).isFile() ? readFileSync(path).toString('hex') : 'folder'];
    }),
  );
}

/** store.db of the host in `hostDir`, opened for `use` and closed after. */
function withStoreDb<T>(hostDir: string, use: (db: Database.Database) => T): T {
  const files = readdirSync(hostDir, { recursive: true, encoding: 'utf8' });
  const db = new Database(join(hostDir, files.find((name) => name.endsWith('store.db'))!));
  db.pragma('busy_timeout = 10000');
  try {
    return use(db);
  } finally {
    db.close();
  }
}

/** The key check values of the entries of the documents named (or not named) `doc`. */
function keyChecksOf(db: Database.Database, doc: string, named: boolean): string[] {
  return db
    .prepare<[string], string>(
      `SELECT DISTINCT e.kc FROM entries e JOIN documents d ON d.id = e.document
       WHERE d.doc ${named ? '=' : '<>'} ? ORDER BY e.kc`,
    )
    .pluck()
    .all(doc);
}

function textAt(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Two passphrase files (0600) of the texts given, and `sync` of project `files` with `--encrypt`
 * and one of them on device `one` or `two` of `setUp`'s devices.
 */
function encryptedSyncs(
  devices: Awaited<ReturnType<typeof setUp>>,
  texts: { a: string; b: string },
) {
  const { th, config, folder } = devices;
  const files = { a: join(tempDir(), 'a'), b: join(tempDir(), 'b') };
  writeFileSync(files.a, `${texts.a}\n`, { mode: 0o600 });
  writeFileSync(files.b, `${texts.b}\n`, { mode: 0o600 });
  const sync = (which: 'one' | 'two', passphrase: string, extra: string[] = []) =>
    spawnCli(
      [
        'sync',
        'files',
        folder[which],
        '--relay',
        th.relayUrl,
        '--encrypt',
        '--passphrase-file',
        passphrase,
        ...extra,
      ],
      config[which],
    );
  return { ...files, sync };
}

describe('sync with another passphrase than the project', () => {
  it('checks the passphrase before anything else, writes and sends nothing, and syncs once it matches', async () => {
    const devices = await setUp();
    const { th, config, folder } = devices;
    const {
      a: right,
      b: wrong,
      sync,
    } = encryptedSyncs(devices, {
      a: 'the project passphrase',
      b: 'another passphrase',
    });
    writeFileSync(join(folder.one, 'note.md'), 'from one\n');
    writeFileSync(
      join(folder.one, 'photo.bin'),
      Buffer.concat([Buffer.from([0]), randomBytes(5_000)]),
    );
    let one = sync('one', right);
    await eventually(
      () =>
        one.out.stdout.includes('sent note.md (new)\n') &&
        one.out.stdout.includes('sent photo.bin (new)\n'),
      'one sent both',
      30_000,
    );
    await confirmed(config.one, 'one confirmed');
    await stop(one);

    writeFileSync(join(folder.two, 'wrongpass-note.md'), 'from two\n');
    writeFileSync(
      join(folder.two, 'scan.bin'),
      Buffer.concat([Buffer.from([0]), randomBytes(5_000)]),
    );
    const store = storeImage(th.dir);
    const folders = { one: folderImage(folder.one), two: folderImage(folder.two) };

    // Alone on the host: the check is all it does.
    const refused = sync('two', wrong);
    expect(await refused.exited).toBe(3);
    expect(refused.out.stdout).not.toMatch(/sent|received|in sync/);
    const lines = refused.out.stderr.trim().split('\n');
    expect(lines.filter((line) => line.includes('passphrase'))).toHaveLength(1);
    expect(refused.out.stderr).toContain('(wrong_passphrase)');
    expect(storeImage(th.dir)).toBe(store);
    expect(folderImage(folder.two)).toBe(folders.two);

    // With the other device online: the same, and nothing reaches it.
    one = sync('one', right);
    await eventually(() => one.out.stdout.includes('in sync\n'), 'one in sync', 30_000);
    const again = sync('two', wrong);
    expect(await again.exited).toBe(3);
    expect(again.out.stdout).not.toMatch(/sent|received/);
    expect(folderImage(folder.two)).toBe(folders.two);
    await stop(one);
    expect(one.out.stdout).not.toContain('received');
    expect(folderImage(folder.one)).toBe(folders.one);
    expect(storeImage(th.dir)).toBe(store);

    // Its passphrase matching now, the device syncs.
    const two = sync('two', right);
    await eventually(
      () => textAt(join(folder.two, 'note.md')) === 'from one\n',
      'note.md at two',
      30_000,
    );
    await eventually(
      () => two.out.stdout.includes('sent wrongpass-note.md (new)\n'),
      'sent',
      30_000,
    );
    await stop(two);
  }, 150_000);

  it('takes another passphrase with --new-passphrase, recorded beside the first', async () => {
    const devices = await setUp();
    const { folder } = devices;
    const {
      a: first,
      b: second,
      sync,
    } = encryptedSyncs(devices, {
      a: 'the first passphrase',
      b: 'the new passphrase',
    });
    const one = sync('one', first);
    await eventually(() => one.out.stdout.includes('in sync\n'), 'one in sync', 30_000);
    await stop(one);
    writeFileSync(join(folder.two, 'new.md'), 'under the new passphrase\n');
    const refused = sync('two', second);
    expect(await refused.exited).toBe(3);
    const renewed = sync('two', second, ['--new-passphrase']);
    await eventually(() => renewed.out.stdout.includes('sent new.md (new)\n'), 'sent', 30_000);
    await eventually(() => renewed.out.stdout.includes('in sync\n'), 'in sync', 30_000);
    await stop(renewed);
    // Recorded now: the next start needs no flag.
    const again = sync('two', second);
    await eventually(() => again.out.stdout.includes('in sync\n'), 'in sync again', 30_000);
    await stop(again);
  }, 120_000);

  it('refuses another passphrase on a project encrypted before devices recorded theirs, and lets the right one record it', async () => {
    const devices = await setUp();
    const { th, config, folder } = devices;
    const {
      a: right,
      b: wrong,
      sync,
    } = encryptedSyncs(devices, {
      a: 'the legacy passphrase',
      b: 'not the legacy one',
    });
    writeFileSync(join(folder.one, 'note.md'), 'written before the check\n');
    const one = sync('one', right);
    await eventually(() => one.out.stdout.includes('sent note.md (new)\n'), 'one sent', 30_000);
    await confirmed(config.one, 'one confirmed');
    await stop(one);
    // The project as an older version left it: its entries sealed under the passphrase, and no
    // check recorded (the host keeps the check document's entries no more).
    const legacyKey = withStoreDb(th.dir, (db) => {
      const [kc, ...more] = keyChecksOf(db, 'sync-host-passphrase', false);
      expect(more).toEqual([]);
      expect(keyChecksOf(db, 'sync-host-passphrase', true)).toEqual([kc]);
      const gone = db
        .prepare(
          "DELETE FROM entries WHERE document IN (SELECT id FROM documents WHERE doc = 'sync-host-passphrase')",
        )
        .run();
      expect(gone.changes).toBe(1);
      return kc;
    });
    expect(legacyKey).toMatch(/^[0-9a-f]+$/);

    writeFileSync(join(folder.two, 'wrongpass-note.md'), 'from two\n');
    const store = storeImage(th.dir);
    const folders = { one: folderImage(folder.one), two: folderImage(folder.two) };
    const refused = sync('two', wrong);
    const exit = withDeadline(refused.exited, 60_000, 'the device with another passphrase runs on');
    expect(await exit).toBe(3);
    expect(refused.out.stdout).not.toMatch(/sent|received|in sync/);
    const lines = refused.out.stderr.trim().split('\n');
    expect(lines.filter((line) => line.includes('passphrase'))).toHaveLength(1);
    expect(refused.out.stderr).toContain('(wrong_passphrase)');
    expect(storeImage(th.dir)).toBe(store);
    expect(folderImage(folder.two)).toBe(folders.two);
    expect(folderImage(folder.one)).toBe(folders.one);

    // The legacy passphrase matches what the host holds: recorded now, and the device syncs.
    const two = sync('two', right);
    await eventually(
      () => textAt(join(folder.two, 'note.md')) === 'written before the check\n',
      'note.md at two',
      30_000,
    );
    await eventually(
      () => two.out.stdout.includes('sent wrongpass-note.md (new)\n'),
      'sent',
      30_000,
    );
    await stop(two);
    withStoreDb(th.dir, (db) => {
      expect(keyChecksOf(db, 'sync-host-passphrase', true)).toEqual([legacyKey]);
      expect(keyChecksOf(db, 'sync-host-passphrase', false)).toEqual([legacyKey]);
    });
  }, 150_000);
});
