import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { plainChunkId } from '../../../client/chunks/chunk-id.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices, stop } from './cli-devices.ts';

/**
 * `sync-host restore` of files kept as chunks (binary files), with real `sync` processes and a
 * real host: an earlier version and a deleted file come back byte for byte on a device whose
 * sync runs meanwhile, in the clear and encrypted; a version whose chunks the host no longer
 * holds is refused in one line and the folder document is left as it was; a file whose kind
 * changed (text, then binary) comes back as the kind it was; a device that changed the file
 * apart meanwhile gets a conflict copy, as for any edit.
 */

const { cli, tempDir, setUp: devices } = cliDevices('restore-blobs');

/** A host, a project and two signed-in devices with their own folders (and a passphrase). */
async function setUp(encrypted: boolean) {
  const passphrase = join(tempDir(), 'passphrase');
  writeFileSync(passphrase, 'restore these files\n', { mode: 0o600 });
  const extra = encrypted ? ['--encrypt', '--passphrase-file', passphrase] : [];
  const { th, config, folder, start } = await devices({ syncArgs: extra });
  /** A one-shot command (history, restore) on device `which`. */
  const run = (which: 'one' | 'two', args: string[]) =>
    cli([...args, '--relay', th.relayUrl, ...extra], config[which]);
  /** Waits until device one's `sync` printed `line` and the host confirmed all it sent. */
  const sent = async (sync: CliRun, line: string) => {
    await eventually(() => sync.out.stdout.includes(`${line}\n`), line, 30_000);
    await eventually(
      async () => {
        const status = await cli(['status', 'files', '--json'], config.one);
        if (status.code !== 0) return false;
        const fields = JSON.parse(status.stdout) as {
          inSync: boolean;
          waitingUp: { files: number };
        };
        return fields.inSync && fields.waitingUp.files === 0;
      },
      `${line}: confirmed`,
      30_000,
    );
  };
  return { th, folder, start, run, sent };
}

const binary = (size: number) => Buffer.concat([Buffer.from([0]), randomBytes(size - 1)]);
const sameBytes = (file: string, expected: Buffer) =>
  existsSync(file) && readFileSync(file).equals(expected);

/**
 * Device one sends photo.bin and old.bin, stops, and (started again) sends a second photo.bin
 * and the delete of old.bin; returns the contents and a time between the two runs.
 */
async function twoVersions(setup: Awaited<ReturnType<typeof setUp>>, size: number) {
  const { folder, start, sent } = setup;
  const first = binary(size);
  const old = binary(size);
  writeFileSync(join(folder.one, 'photo.bin'), first);
  writeFileSync(join(folder.one, 'old.bin'), old);
  let one = start('one');
  await sent(one, 'sent photo.bin (new)');
  await sent(one, 'sent old.bin (new)');
  await stop(one);
  const between = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const second = binary(size);
  writeFileSync(join(folder.one, 'photo.bin'), second);
  unlinkSync(join(folder.one, 'old.bin'));
  one = start('one');
  await sent(one, 'sent photo.bin');
  await sent(one, 'sent old.bin (deleted)');
  await stop(one);
  return { first, second, old, between };
}

/** The change column of `history`'s lines for `name`. */
function changes(stdout: string, name: string): string[] {
  return stdout
    .trim()
    .split('\n')
    .filter((line) => line.endsWith(`  ${name}`))
    .map((line) => line.split('  ')[2]!);
}

describe('sync-host restore of files kept as chunks', () => {
  it.each([
    ['in the clear', false],
    ['encrypted', true],
  ])(
    'brings back an earlier version and a deleted binary file on a running device, byte for byte (%s)',
    async (_, encrypted) => {
      const setup = await setUp(encrypted);
      const { folder, start, run } = setup;
      // 300 KB: two chunks.
      const { first, second, old, between } = await twoVersions(setup, 300_000);
      const two = start('two');
      await eventually(
        () => sameBytes(join(folder.two, 'photo.bin'), second),
        'second photo.bin at two',
        30_000,
      );
      expect(existsSync(join(folder.two, 'old.bin'))).toBe(false);

      const earlier = await run('one', ['restore', 'files', 'photo.bin', '--at', between]);
      expect(earlier.code, earlier.stderr).toBe(0);
      expect(earlier.stdout).toBe(`restored photo.bin as of ${between}\n`);
      await eventually(
        () => sameBytes(join(folder.two, 'photo.bin'), first),
        'first photo.bin back at two',
        30_000,
      );
      const back = await run('one', ['restore', 'files', 'old.bin']);
      expect(back.code, back.stderr).toBe(0);
      await eventually(
        () => sameBytes(join(folder.two, 'old.bin'), old),
        'old.bin back at two',
        30_000,
      );
      const again = await run('one', ['restore', 'files', 'old.bin']);
      expect(again.stdout).toBe('old.bin is already as it was\n');
      await stop(two);

      const history = await run('one', ['history', 'files']);
      expect(history.code, history.stderr).toBe(0);
      expect(changes(history.stdout, 'photo.bin')).toEqual(['created', 'changed', 'changed']);
      expect(changes(history.stdout, 'old.bin')).toEqual(['created', 'deleted', 'restored']);
      // Device one gets both when it starts, and no conflict copy is made anywhere.
      const one = start('one');
      await eventually(
        () =>
          sameBytes(join(folder.one, 'photo.bin'), first) &&
          sameBytes(join(folder.one, 'old.bin'), old),
        'both restored files at one',
        30_000,
      );
      await stop(one);
      for (const dir of [folder.one, folder.two]) {
        expect(readdirSync(dir).filter((name) => name.includes('sync-conflict'))).toEqual([]);
      }
    },
    150_000,
  );

  it('refuses in one line a version whose chunks the host no longer holds, and changes nothing', async () => {
    const setup = await setUp(false);
    const { th, folder, start, run } = setup;
    const { first, second, between } = await twoVersions(setup, 5_000);
    const before = await run('one', ['history', 'files']);
    expect(before.code, before.stderr).toBe(0);
    // What the store's sweep does to chunks no device asked about for the whole history.
    const file = readdirSync(th.dir, { recursive: true, encoding: 'utf8' }).find((name) =>
      name.endsWith('store.db'),
    );
    const store = new Database(join(th.dir, file ?? 'store.db'), { fileMustExist: true });
    try {
      const gone = store.prepare('DELETE FROM chunks WHERE id = ?').run(await plainChunkId(first));
      expect(gone.changes).toBe(1);
    } finally {
      store.close();
    }

    const refused = await run('one', ['restore', 'files', 'photo.bin', '--at', between]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `sync-host restore: photo.bin as of ${between} cannot be restored: the host no longer holds 1 of its 1 chunks (nothing was changed) (chunk_missing)\n`,
    );
    const after = await run('one', ['history', 'files']);
    expect(after.stdout).toBe(before.stdout);
    // The current version, whose chunk the host holds, still reaches a device.
    const two = start('two');
    await eventually(
      () => sameBytes(join(folder.two, 'photo.bin'), second),
      'second photo.bin at two',
      30_000,
    );
    await stop(two);
  }, 120_000);
  it('brings back a file whose kind changed as the kind it was then: text over a binary file, and back', async () => {
    const { folder, start, run, sent } = await setUp(false);
    const text = 'first, as text\n';
    writeFileSync(join(folder.one, 'kind.dat'), text);
    let one = start('one');
    await sent(one, 'sent kind.dat (new)');
    await stop(one);
    const asText = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const bytes = binary(5_000);
    writeFileSync(join(folder.one, 'kind.dat'), bytes);
    one = start('one');
    await sent(one, 'sent kind.dat');
    await stop(one);
    const asBinary = new Date().toISOString();
    const two = start('two');
    await eventually(() => sameBytes(join(folder.two, 'kind.dat'), bytes), 'binary at two', 30_000);

    const toText = await run('one', ['restore', 'files', 'kind.dat', '--at', asText]);
    expect(toText.code, toText.stderr).toBe(0);
    await eventually(
      () => sameBytes(join(folder.two, 'kind.dat'), Buffer.from(text)),
      'text back at two',
      30_000,
    );
    const toBinary = await run('one', ['restore', 'files', 'kind.dat', '--at', asBinary]);
    expect(toBinary.code, toBinary.stderr).toBe(0);
    await eventually(
      () => sameBytes(join(folder.two, 'kind.dat'), bytes),
      'binary back at two',
      30_000,
    );
    await stop(two);
    expect(readdirSync(folder.two).filter((name) => name.includes('sync-conflict'))).toEqual([]);
  }, 120_000);
  it('meets the conflict rule like any edit: a device that changed the file apart keeps both versions', async () => {
    const setup = await setUp(false);
    const { folder, start, run } = setup;
    const { first, second, between } = await twoVersions(setup, 5_000);
    let two = start('two');
    await eventually(
      () => sameBytes(join(folder.two, 'photo.bin'), second),
      'second at two',
      30_000,
    );
    await stop(two);
    const restored = await run('one', ['restore', 'files', 'photo.bin', '--at', between]);
    expect(restored.code, restored.stderr).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // Changed at two from the version it saw, before it hears of the restore.
    const third = binary(5_000);
    writeFileSync(join(folder.two, 'photo.bin'), third);
    two = start('two');
    const copies = () =>
      readdirSync(folder.two).filter((name) => name.startsWith('photo.sync-conflict'));
    await eventually(() => copies().length === 1, 'a conflict copy at two', 30_000);
    // The most recent edit (two's) keeps the name; the restored version is the copy.
    expect(copies()[0]).toMatch(/^photo\.sync-conflict-\d{8}-\d{6}-\d+\.bin$/);
    await eventually(
      () => sameBytes(join(folder.two, copies()[0]!), first),
      'restored copy',
      30_000,
    );
    expect(sameBytes(join(folder.two, 'photo.bin'), third)).toBe(true);
    await stop(two);
  }, 120_000);
});
