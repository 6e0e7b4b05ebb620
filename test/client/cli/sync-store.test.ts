import {
  appendFileSync,
  mkdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { statePath } from '../../../client/cli/sync-command.ts';
import { textFiles } from '../../folder/devices.ts';
import { gitMerge } from '../../folder/git-merge.ts';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject } from '../../helpers/host.ts';
import {
  type HostPorts,
  hostDir,
  type RunningHost,
  startHostProgram,
} from '../../helpers/host-process.ts';
import { freePort } from '../../helpers/ports.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';
import { signIn } from '../host.ts';
import { exposes, storeFilesText } from '../plaintext.ts';

/**
 * Two `sync` processes of one user that never run at the same time (a laptop at work, a desktop
 * at home) and a host that keeps the documents, restarted between them. The relay buffer keeps
 * frames for 2 s only, and each device waits longer than that: what reaches the second device
 * came from the host's document store.
 */

const runner = createCliRunner();
const temps: string[] = [];
const email = 'nas@example.org';

const tempDir = tempDirMaker('sync-store-');

const bufferExpired = () => new Promise((resolve) => setTimeout(resolve, 2_500));

describe('sync-host sync through the host alone (devices never online together)', () => {
  let ports: HostPorts;
  let dir: string;
  let host: RunningHost;
  const config = { laptop: '', desktop: '' };
  const tokens = { laptop: '', desktop: '' };
  let projects = 0;

  beforeAll(async () => {
    ports = { auth: await freePort(), ws: await freePort(), status: await freePort() };
    dir = hostDir(ports);
    temps.push(dir);
    appendFileSync(join(dir, 'relay.conf'), '\nbuffer.seconds=2\n');
    host = await startHostProgram(dir);
    for (const name of ['laptop', 'desktop'] as const) {
      const signed = await signIn(host, email, name);
      tokens[name] = signed.deviceToken;
      config[name] = tempDir();
      const login = await runner.cli(
        ['login', '--auth', host.authUrl, '--token', signed.deviceToken],
        config[name],
      );
      expect(login.code).toBe(0);
    }
  });

  afterEach(() => runner.killAll());

  afterAll(async () => {
    await host?.process.stop('SIGKILL').catch(() => null);
    for (const temp of temps) rmSync(temp, { recursive: true, force: true });
  });

  async function restartHost(): Promise<void> {
    expect(await host.process.stop('SIGTERM')).toBe(0);
    host = await startHostProgram(dir);
  }

  /** `sync` of `device`, resolved once it is in sync with the host. */
  async function sync(device: 'laptop' | 'desktop', key: string, folder: string, extra: string[]) {
    const run = runner.spawnCli(
      ['sync', key, folder, '--relay', host.relayUrl, ...extra],
      config[device],
    );
    await eventually(
      () => run.out.stdout.includes('in sync') || run.child.exitCode !== null,
      `${device} in sync`,
      20_000,
    );
    expect(run.child.exitCode, run.out.stderr).toBeNull();
    return run;
  }

  /** Stops a sync as a user does (Ctrl-C): it sends what it read and waits for the host. */
  async function stop(run: CliRun): Promise<void> {
    run.child.kill('SIGINT');
    await eventually(() => run.child.exitCode !== null, 'sync stopped', 10_000);
    expect(run.child.exitCode, run.out.stderr).toBe(0);
  }

  for (const encrypted of [false, true]) {
    const label = encrypted ? 'with --encrypt' : 'unencrypted';
    it(`brings files, offline edits and deletions from one device to the other, across a host restart (${label})`, async () => {
      projects += 1;
      const key = `nas-${projects}`;
      await registerProject(host.authUrl, tokens.laptop, key);
      const extra: string[] = [];
      if (encrypted) {
        const file = join(tempDir(), 'passphrase');
        writeFileSync(file, 'a long shared passphrase\n', { mode: 0o600 });
        extra.push('--encrypt', '--passphrase-file', file);
      }
      const laptop = tempDir();
      const desktop = tempDir();
      const secretName = `salary-review-${projects}.md`;
      const secretText = `raise for everyone ${projects}-c0ffee`;
      writeFileSync(join(laptop, secretName), secretText);
      writeFileSync(join(laptop, 'plan.txt'), 'one\ntwo\nthree\n');

      const first = await sync('laptop', key, laptop, extra);
      await eventually(() => first.out.stdout.includes(`sent ${secretName}`), 'sent', 10_000);
      await stop(first);
      // The state log keeps the folder document's place on the host for the next start.
      const log = readFileSync(statePath(config.laptop, host.authUrl, key, laptop), 'utf8');
      const place = JSON.parse(log.trim().split('\n').at(-1)!).s;
      expect(place.position).toBeGreaterThan(0);
      expect(place.doc).toEqual(encrypted ? expect.stringMatching(/^h[\w-]{43}$/) : 'files');
      await restartHost();
      await bufferExpired();

      const second = await sync('desktop', key, desktop, extra);
      // In sync means caught up with the host: the files are there (or being written).
      await eventually(
        () =>
          textFiles(desktop)?.[secretName] === secretText &&
          textFiles(desktop)?.['plan.txt'] === 'one\ntwo\nthree\n',
        'the laptop’s files on the desktop',
        10_000,
      );
      await stop(second);
      await bufferExpired();

      // Offline on the laptop: an edit and a deletion, then a short session, then the desktop.
      writeFileSync(join(laptop, 'plan.txt'), 'one\nthree\nfour\n');
      unlinkSync(join(laptop, secretName));
      const third = await sync('laptop', key, laptop, extra);
      await stop(third);
      await restartHost();
      await bufferExpired();
      const fourth = await sync('desktop', key, desktop, extra);
      await eventually(
        () => {
          const files = textFiles(desktop);
          return files?.['plan.txt'] === 'one\nthree\nfour\n' && !(secretName in files);
        },
        'the offline edit and deletion on the desktop',
        10_000,
      );
      await stop(fourth);

      const stored = storeFilesText(join(dir, 'data'));
      expect(stored.length).toBeGreaterThan(0);
      // Unencrypted, the host can read what it keeps (so the check below can see plaintext).
      expect(exposes(stored, secretText)).toBe(!encrypted);
      expect(exposes(stored, secretName)).toBe(!encrypted);
      expect(exposes(stored, `review-${projects}.md`)).toBe(!encrypted);
    }, 90_000);
  }

  it('keeps running while the host is killed and started again, and then sends what changed meanwhile', async () => {
    projects += 1;
    const key = `nas-${projects}`;
    await registerProject(host.authUrl, tokens.laptop, key);
    const laptop = tempDir();
    const desktop = tempDir();
    writeFileSync(join(laptop, 'before.txt'), 'before\n');
    const one = await sync('laptop', key, laptop, []);
    const two = await sync('desktop', key, desktop, []);
    await eventually(() => textFiles(desktop)?.['before.txt'] === 'before\n', 'before.txt', 10_000);

    await host.process.stop('SIGKILL');
    writeFileSync(join(laptop, 'during.txt'), 'written while the host was down\n');
    writeFileSync(join(desktop, 'before.txt'), 'before\nedited while the host was down\n');
    await eventually(() => one.out.stdout.includes('sent during.txt'), 'during.txt read', 10_000);
    await eventually(() => two.out.stdout.includes('sent before.txt'), 'the edit read', 10_000);
    host = await startHostProgram(dir);

    const expected = {
      'before.txt': 'before\nedited while the host was down\n',
      'during.txt': 'written while the host was down\n',
    };
    for (const folder of [laptop, desktop]) {
      await eventually(
        () => JSON.stringify(textFiles(folder)) === JSON.stringify(expected),
        `both changes in ${folder}`,
        40_000,
      );
    }
    expect(one.child.exitCode, one.out.stderr).toBeNull();
    expect(two.child.exitCode, two.out.stderr).toBeNull();
    await stop(one);
    await stop(two);
  }, 90_000);

  it('lists when files changed and restores a deleted file and an earlier version, reaching every device (with --encrypt)', async () => {
    projects += 1;
    const key = `nas-${projects}`;
    await registerProject(host.authUrl, tokens.laptop, key);
    const file = join(tempDir(), 'passphrase');
    writeFileSync(file, 'history passphrase\n', { mode: 0o600 });
    const extra = ['--encrypt', '--passphrase-file', file];
    const laptop = tempDir();
    writeFileSync(join(laptop, 'plan.txt'), 'first version\n');
    writeFileSync(join(laptop, 'gone.txt'), 'deleted later\n');
    const first = await sync('laptop', key, laptop, extra);
    await eventually(() => first.out.stdout.includes('sent gone.txt'), 'sent', 10_000);
    await stop(first);
    const between = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    writeFileSync(join(laptop, 'plan.txt'), 'second version\n');
    unlinkSync(join(laptop, 'gone.txt'));
    const second = await sync('laptop', key, laptop, extra);
    await stop(second);

    const listed = await runner.cli(['history', key, ...extra], config.desktop);
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(
      lines.filter((line) => line.endsWith('  plan.txt')).map((l) => l.split('  ')[2]),
    ).toEqual(['created', 'changed']);
    expect(
      lines.filter((line) => line.endsWith('  gone.txt')).map((l) => l.split('  ')[2]),
    ).toEqual(['created', 'deleted']);
    const one = await runner.cli(['history', key, 'gone.txt', ...extra], config.desktop);
    expect(one.stdout.trim().split('\n')).toHaveLength(2);
    // Without the passphrase (which names the document too) nothing is found.
    const blind = await runner.cli(['history', key], config.desktop);
    expect(blind.code).toBe(0);
    expect(blind.stdout).toBe('');
    expect(blind.stderr).toMatch(/keeps nothing of nas-\d+'s folder/);

    const back = await runner.cli(['restore', key, 'gone.txt', ...extra], config.desktop);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/restored gone\.txt/);
    const earlier = await runner.cli(
      ['restore', key, 'plan.txt', '--at', between, ...extra],
      config.desktop,
    );
    expect(earlier.code, earlier.stderr).toBe(0);
    const missing = await runner.cli(['restore', key, 'never.txt', ...extra], config.desktop);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/never\.txt is not in what the host keeps/);
    const badTime = await runner.cli(
      ['restore', key, 'plan.txt', '--at', 'yesterday', ...extra],
      config.desktop,
    );
    expect(badTime.code).toBe(2);

    // Both edits reach the laptop (and any other device) through the host.
    await bufferExpired();
    const third = await sync('laptop', key, laptop, extra);
    await eventually(
      () => {
        const files = textFiles(laptop);
        return files?.['gone.txt'] === 'deleted later\n' && files['plan.txt'] === 'first version\n';
      },
      'the restored files on the laptop',
      10_000,
    );
    await stop(third);
  }, 90_000);

  it('restores a whole folder, and the whole project as it was at a moment, after an rm -rf', async () => {
    projects += 1;
    const key = `nas-${projects}`;
    await registerProject(host.authUrl, tokens.laptop, key);
    const laptop = tempDir();
    mkdirSync(join(laptop, 'sub', 'deep'), { recursive: true });
    writeFileSync(join(laptop, 'sub', 'a.md'), 'note a\n');
    writeFileSync(join(laptop, 'sub', 'deep', 'b.md'), 'note b\n');
    writeFileSync(join(laptop, 'top.md'), 'top\n');
    const first = await sync('laptop', key, laptop, []);
    await eventually(() => first.out.stdout.includes('sent top.md'), 'sent', 10_000);
    await stop(first);
    const before = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // By mistake: the folder's contents removed, and the deletes sent.
    rmSync(join(laptop, 'sub'), { recursive: true });
    writeFileSync(join(laptop, 'top.md'), 'top, edited after\n');
    const second = await sync('laptop', key, laptop, []);
    await stop(second);

    const folder = await runner.cli(['restore', key, 'sub/'], config.desktop);
    expect(folder.code, folder.stderr).toBe(0);
    expect(folder.stdout.trim().split('\n').sort()).toEqual([
      'restored sub/a.md as of its last version',
      'restored sub/deep/b.md as of its last version',
    ]);
    const nothing = await runner.cli(['restore', key, 'elsewhere/'], config.desktop);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/no file under elsewhere\/ is in what the host keeps/);
    const all = await runner.cli(['restore', key, '--all', '--at', before], config.desktop);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain(`restored top.md as of ${new Date(before).toISOString()}`);
    expect(all.stdout).toContain('sub/a.md is already as it was');

    await bufferExpired();
    const third = await sync('laptop', key, laptop, []);
    await eventually(
      () => {
        const files = textFiles(laptop);
        return (
          files?.['sub/a.md'] === 'note a\n' &&
          files['sub/deep/b.md'] === 'note b\n' &&
          files['top.md'] === 'top\n'
        );
      },
      'the folder back on the laptop',
      10_000,
    );
    await stop(third);
  }, 90_000);

  it('restores an earlier version region by region: an edit made meanwhile on another device stays', async () => {
    projects += 1;
    const key = `nas-${projects}`;
    await registerProject(host.authUrl, tokens.laptop, key);
    const laptop = tempDir();
    const lines = Array.from({ length: 10 }, (_, i) => `line ${i + 1}`);
    const version = (edits: Record<number, string>) =>
      `${lines.map((line, i) => (edits[i + 1] === undefined ? line : `${line} ${edits[i + 1]}`)).join('\n')}\n`;
    const first = version({});
    writeFileSync(join(laptop, 'plan.md'), first);
    await stop(await sync('laptop', key, laptop, []));
    const between = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = version({ 2: 'changed', 9: 'changed' });
    writeFileSync(join(laptop, 'plan.md'), second);
    await stop(await sync('laptop', key, laptop, []));
    // Edited on the laptop while its sync is stopped; the desktop brings the first version back.
    const offline = version({ 2: 'changed', 5: 'offline', 9: 'changed' });
    writeFileSync(join(laptop, 'plan.md'), offline);
    const back = await runner.cli(['restore', key, 'plan.md', '--at', between], config.desktop);
    expect(back.code, back.stderr).toBe(0);

    await bufferExpired();
    const third = await sync('laptop', key, laptop, []);
    const merged = gitMerge(second, offline, first);
    expect(merged.clean).toBe(true);
    await eventually(
      () => textFiles(laptop)?.['plan.md'] === merged.text,
      'the restored version with the offline edit on the laptop',
      10_000,
    );
    expect(Object.keys(textFiles(laptop) ?? {})).toEqual(['plan.md']);
    await stop(third);
  }, 90_000);
});
