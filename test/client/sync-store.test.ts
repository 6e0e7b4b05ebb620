import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CliRun, createCliRunner } from '../helpers/cli-process.ts';
import { registerProject } from '../helpers/host.ts';
import {
  freePort,
  type HostPorts,
  hostDir,
  type RunningHost,
  startHost,
} from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';
import { textFiles } from './folder-devices.ts';
import { signIn } from './host.ts';

/**
 * Two `sync` processes of one user that never run at the same time (a laptop at work, a desktop
 * at home) and a host that keeps the documents, restarted between them. The relay buffer keeps
 * frames for 2 s only, and each device waits longer than that: what reaches the second device
 * came from the host's document store.
 */

const runner = createCliRunner();
const temps: string[] = [];
const email = 'nas@example.org';

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sync-store-'));
  temps.push(dir);
  return dir;
}

/** Whether `text` holds `marker`, as is or in any base64 run. */
function exposes(text: string, marker: string): boolean {
  if (text.includes(marker)) return true;
  for (const run of text.match(/[A-Za-z0-9+/]{8,}={0,2}/g) ?? []) {
    if (Buffer.from(run, 'base64').toString('latin1').includes(marker)) return true;
  }
  return false;
}

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
    host = await startHost(dir);
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
    host = await startHost(dir);
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

      const stored = readdirSync(join(dir, 'data'))
        .filter((name) => name.startsWith('store.db'))
        .map((name) => readFileSync(join(dir, 'data', name)).toString('latin1'))
        .join('\n');
      expect(stored.length).toBeGreaterThan(0);
      // Unencrypted, the host can read what it keeps (so the check below can see plaintext).
      expect(exposes(stored, secretText)).toBe(!encrypted);
      expect(exposes(stored, secretName)).toBe(!encrypted);
      expect(exposes(stored, `review-${projects}.md`)).toBe(!encrypted);
    }, 90_000);
  }
});
