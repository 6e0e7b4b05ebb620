import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statePath } from '../../../client/cli/sync-command.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject, startTestHost, type TestHost } from '../../helpers/host.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';

const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-folder-');

/**
 * Every file under `dir` (dot files left out) by relative path, with its text. The sync process
 * may rename or delete a file between the directory read and the file read: then undefined (not
 * settled; the next poll reads again).
 */
function listing(dir: string, leaveOut: string[] = []): Record<string, string> | undefined {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || entry.name.startsWith('.')) continue;
    const path = relative(dir, join(entry.parentPath, entry.name));
    if (leaveOut.includes(path)) continue;
    try {
      files[path] = readFileSync(join(dir, path), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return undefined;
    }
  }
  return files;
}

/** Waits until both folders hold the same text files; resolves with them. */
function sameFolders(one: string, two: string, leaveOut: string[]) {
  return eventually(
    () => {
      const a = listing(one, leaveOut);
      const b = listing(two, leaveOut);
      return a !== undefined && JSON.stringify(a) === JSON.stringify(b) ? a : undefined;
    },
    'the two folders alike',
    20_000,
  );
}

describe('sync-host sync: two processes keep two folders in step', () => {
  let th: TestHost;
  const config = { one: '', two: '' };
  const folder = { one: '', two: '' };

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    const one = await th.signIn('folder@example.org', 'one');
    const two = await th.signIn('folder@example.org', 'two');
    await registerProject(th.base, one.deviceToken, 'shared');
    config.one = tempDir();
    config.two = tempDir();
    folder.one = tempDir();
    folder.two = tempDir();
    for (const [dir, token] of [
      [config.one, one.deviceToken],
      [config.two, two.deviceToken],
    ] as const) {
      expect((await cli(['login', '--auth', th.base, '--token', token], dir)).code).toBe(0);
    }
  });

  afterAll(async () => {
    killAll();
    await th?.close();
  });

  const start = (which: 'one' | 'two') =>
    spawnCli(['sync', 'shared', folder[which], '--relay', th.relayUrl], config[which]);

  it('converges on concurrent edits, renames and deletes, and after a restart', async () => {
    writeFileSync(join(folder.one, 'a.txt'), 'alpha\n');
    writeFileSync(join(folder.one, 'b.txt'), 'bravo\n');
    writeFileSync(join(folder.one, 'd.txt'), 'delta\n');
    writeFileSync(join(folder.one, 'image.bin'), Buffer.from([0x89, 0x50, 0x00, 0x01]));
    writeFileSync(join(folder.one, 'huge.txt'), 'x'.repeat(1_048_577));
    const skipped = ['image.bin', 'huge.txt'];
    const one = start('one');
    await eventually(() => one.out.stdout.includes('watching'), 'one watching', 15_000);
    let two = start('two');
    await eventually(() => two.out.stdout.includes('watching'), 'two watching', 15_000);
    // A binary file and a text file over 1 MiB go as chunks through the host, byte for byte.
    for (const name of skipped) {
      const sent = readFileSync(join(folder.one, name));
      await eventually(
        () =>
          existsSync(join(folder.two, name)) && readFileSync(join(folder.two, name)).equals(sent),
        `${name} at two`,
        15_000,
      );
    }
    expect(await sameFolders(folder.one, folder.two, skipped)).toEqual({
      'a.txt': 'alpha\n',
      'b.txt': 'bravo\n',
      'd.txt': 'delta\n',
    });

    // Both sides at once: an edit of the same file each, a rename here, a delete and a new
    // file in a new folder there.
    writeFileSync(join(folder.one, 'a.txt'), 'alpha\nfrom one\n');
    writeFileSync(join(folder.two, 'a.txt'), 'from two\nalpha\n');
    renameSync(join(folder.one, 'b.txt'), join(folder.one, 'c.txt'));
    rmSync(join(folder.two, 'd.txt'));
    mkdirSync(join(folder.two, 'sub'));
    writeFileSync(join(folder.two, 'sub', 'e.txt'), 'echo\n');
    expect(await sameFolders(folder.one, folder.two, skipped)).toEqual({
      'a.txt': 'from two\nalpha\nfrom one\n',
      'c.txt': 'bravo\n',
      'sub/e.txt': 'echo\n',
    });

    // Two stops; both sides edit; two starts again and sends only what changed meanwhile.
    two.child.kill('SIGTERM');
    expect(await two.exited).toBe(0);
    writeFileSync(
      join(folder.one, 'a.txt'),
      'from two\nalpha\nfrom one\none while two was stopped\n',
    );
    writeFileSync(join(folder.two, 'c.txt'), 'bravo\ntwo while stopped\n');
    writeFileSync(join(folder.two, 'f.txt'), 'foxtrot\n');
    two = start('two');
    expect(await sameFolders(folder.one, folder.two, skipped)).toEqual({
      'a.txt': 'from two\nalpha\nfrom one\none while two was stopped\n',
      'c.txt': 'bravo\ntwo while stopped\n',
      'f.txt': 'foxtrot\n',
      'sub/e.txt': 'echo\n',
    });
    // The restart sent only what changed while it was stopped (its state file knew the rest).
    expect(two.out.stdout).not.toContain('sent a.txt');
    expect(two.out.stdout).not.toContain('sent sub/e.txt');
    expect(two.out.stdout).toContain('sent f.txt (new)');
    one.child.kill('SIGTERM');
    two.child.kill('SIGTERM');
    expect(await one.exited).toBe(0);
    expect(await two.exited).toBe(0);
  }, 90_000);

  it('with --encrypt, syncs between devices with the passphrase and refuses one with another', async () => {
    const third = await th.signIn('folder@example.org', 'three');
    const configThree = tempDir();
    expect(
      (await cli(['login', '--auth', th.base, '--token', third.deviceToken], configThree)).code,
    ).toBe(0);
    const dirs = { one: tempDir(), two: tempDir(), three: tempDir() };
    const configs = { one: config.one, two: config.two, three: configThree };
    writeFileSync(join(dirs.one, 'diary.txt'), 'dear diary\n');
    const startEncrypted = (which: 'one' | 'two' | 'three') => {
      const run = spawnCli(
        ['sync', 'shared', dirs[which], '--relay', th.relayUrl, '--encrypt'],
        configs[which],
      );
      run.child.stdin.write(which === 'three' ? 'not the passphrase\n' : 'the passphrase\n');
      return run;
    };
    const one = startEncrypted('one');
    const two = startEncrypted('two');
    await eventually(
      () => listing(dirs.two)?.['diary.txt'] === 'dear diary\n',
      'the diary at two',
      20_000,
    );
    // Three comes to a project whose devices use another passphrase: it never syncs, says why
    // in one line and exits (code 3: a service does not start it again).
    const three = startEncrypted('three');
    expect(await three.exited).toBe(3);
    expect(three.out.stderr).toContain("this device's passphrase is not the one");
    expect(three.out.stdout).not.toContain('sent');
    expect(listing(dirs.three)).toEqual({});
    for (const run of [one, two]) run.child.kill('SIGTERM');
    for (const run of [one, two]) expect(await run.exited).toBe(0);
  }, 90_000);

  it('refuses a folder or a state log it cannot use with one line, no stack trace, and writes nothing', async () => {
    const base = tempDir();
    writeFileSync(join(base, 'a-file'), 'not a folder\n');
    const inFile = await cli(
      ['sync', 'shared', join(base, 'a-file', 'notes'), '--relay', th.relayUrl],
      config.one,
    );
    expect(inFile.code).toBe(1);
    expect(inFile.stderr.trim().split('\n')).toEqual([
      `sync-host sync: the folder ${join(base, 'a-file', 'notes')} cannot be used (ENOTDIR) (folder_unusable)`,
    ]);

    const notes = join(base, 'notes');
    mkdirSync(notes);
    const state = statePath(config.one, th.base, 'shared', notes);
    mkdirSync(state, { recursive: true }); // a folder where the state log goes: it cannot be read
    const badState = await cli(['sync', 'shared', notes, '--relay', th.relayUrl], config.one);
    expect(badState.code).toBe(1);
    expect(badState.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^sync-host sync: the state of this folder, .+, cannot be read or written \(EISDIR\); .+ \(folder_unusable\)$/,
      ),
    ]);
    expect(readdirSync(notes)).toEqual([]);
  }, 30_000);
});
