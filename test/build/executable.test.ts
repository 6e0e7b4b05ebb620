import { execFile } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeb } from '../../build/deb.ts';
import { buildExecutable } from '../../build/sea.ts';
import { createCliRunner } from '../helpers/cli-process.ts';
import { type HostProcess, hostDir, startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
};

// One build for the file: the executable alone in an empty folder, run from there.
let temp: string;
let alone: string;
let executable: string;
let host: HostProcess | undefined;
let configDir: string;
const clients = () => createCliRunner({ executable, env: { HOME: alone } });
let runner: ReturnType<typeof clients>;
beforeAll(async () => {
  temp = mkdtempSync(join(tmpdir(), 'sync-host-sea-'));
  alone = join(temp, 'alone');
  mkdirSync(alone);
  executable = await buildExecutable(join(alone, 'sync-host'), join(temp, 'work'));
  runner = clients();
  configDir = hostDir();
}, 300_000);
afterAll(async () => {
  runner?.killAll();
  await host?.stop('SIGTERM');
  rmSync(temp, { recursive: true, force: true });
  rmSync(configDir, { recursive: true, force: true });
});

describe('the single executable (npm run build:bin)', () => {
  it('runs --version alone in an empty folder', async () => {
    expect(readdirSync(alone)).toEqual(['sync-host']);
    const { stdout } = await run(executable, ['--version'], { cwd: alone, env: { PATH: '' } });
    expect(stdout).toBe(`${version}\n`);
  });

  it('runs the headless host: /health, the admin UI inside it, native SQLite inside it', async () => {
    host = await startHostProcess(['--headless'], configDir, { executable });
    const auth = await host.url('auth');
    expect((await fetch(`${auth}/health`)).status).toBe(200);
    const app = await fetch(`${auth}/admin/app.js`);
    expect(app.status).toBe(200);
    expect((await app.text()).length).toBeGreaterThan(1000);
    // No fallback to sql.js: better-sqlite3's addon was loaded from inside the executable.
    expect(host.stderr.join('\n')).not.toMatch(/sql\.js/);
  });

  it('pairs a device, and its client commands join the relay and carry a message', async () => {
    if (host === undefined) throw new Error('no host');
    const auth = await host.url('auth');
    const adminToken =
      new URLSearchParams(new URL(await host.url('admin')).hash.slice(1)).get('token') ?? '';
    const [first, second] = [join(temp, 'first'), join(temp, 'second')];
    mkdirSync(first);
    mkdirSync(second);
    // The first device is approved in the admin UI (its request, made here).
    const login = runner.spawnCli(['login', '--auth', auth], first);
    const code = await login.code();
    const approved = await fetch(`${auth}/admin/api/pairings/approve`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ code, email: 'nas-owner@example.org' }),
    });
    expect(approved.status).toBe(200);
    expect(await login.exited).toBe(0);
    // The second one by the first, with a client command.
    const pairing = runner.spawnCli(
      ['login', '--auth', auth, '--account', 'nas-owner@example.org'],
      second,
    );
    const secondCode = await pairing.code();
    expect((await runner.cli(['pair', 'approve', secondCode], first)).code).toBe(0);
    expect(await pairing.exited).toBe(0);

    for (const device of [first, second]) {
      expect((await runner.cli(['project', 'add', 'notes', 'Notes'], device)).code).toBe(0);
    }
    const listen = runner.spawnCli(['listen', 'notes'], second);
    await eventually(() => listen.out.stderr.includes('joined room'), 'listen joined', 30_000);
    const text = 'from the single executable';
    const sent = await runner.cli(['send', 'notes', 'broadcast', JSON.stringify({ text })], first);
    expect(sent.code).toBe(0);
    await eventually(() => listen.out.stdout.includes('\n'), 'the message at listen', 15_000);
    expect(JSON.parse(listen.out.stdout.split('\n')[0] ?? '')).toMatchObject({ payload: { text } });
    listen.child.kill('SIGINT');
    expect(await listen.exited).toBe(0);
  }, 90_000);

  it('carries sql.js too: the WebAssembly SQLite runs from inside it', async () => {
    const dir = hostDir();
    const wasm = await startHostProcess(['--headless'], dir, {
      executable,
      env: { SYNC_HOST_SQLITE_ENGINE: 'wasm' },
    });
    try {
      expect((await fetch(`${await wasm.url('auth')}/health`)).status).toBe(200);
      expect(wasm.stderr.join('\n')).toMatch(/SQLite engine: sql\.js/);
    } finally {
      expect(await wasm.stop('SIGTERM')).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A program on PATH (lintian, systemd-analyze), or undefined. */
async function which(name: string): Promise<string | undefined> {
  try {
    return (await run('sh', ['-c', `command -v ${name}`])).stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

describe('the .deb (npm run build:deb)', () => {
  let deb: string;
  let installed: string;
  /** The package's control files and maintainer scripts (dpkg-deb -e). */
  let control: string;
  beforeAll(async () => {
    deb = await buildDeb(executable, join(temp, 'deb-tree'), join(temp, 'packages'));
    installed = join(temp, 'root');
    await run('dpkg-deb', ['-x', deb, installed]);
    control = join(temp, 'control');
    await run('dpkg-deb', ['-e', deb, control]);
  }, 300_000);

  it('holds the executable, the unit, /etc/sync-host/auth.conf and nothing of Electron', async () => {
    const { stdout } = await run('dpkg-deb', ['-c', deb]);
    const files = stdout
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('d'))
      .map((line) => line.split(/\s+/).at(-1));
    expect(files).toEqual(
      expect.arrayContaining([
        './usr/bin/sync-host',
        './lib/systemd/system/sync-host.service',
        './etc/sync-host/auth.conf',
        './usr/share/doc/sync-host/copyright',
      ]),
    );
    expect(stdout).not.toMatch(/electron|node_modules/i);
    expect(stdout).toMatch(/-rw-r----- root\/root .* \.\/etc\/sync-host\/auth\.conf/);
    const control = (await run('dpkg-deb', ['-f', deb])).stdout;
    expect(control).toMatch(/^Package: sync-host$/m);
    expect(control).toMatch(/^Depends: adduser/m);
    expect((await run('dpkg-deb', ['-I', deb, 'conffiles'])).stdout).toBe(
      '/etc/sync-host/auth.conf\n',
    );
    // The maintainer script makes the system user and its data folder.
    const postinst = (await run('dpkg-deb', ['-I', deb, 'postinst'])).stdout;
    expect(postinst).toContain('adduser --system --group --home /var/lib/sync-host');
    expect(postinst).toContain('install -d -o sync-host -g sync-host -m 0700 /var/lib/sync-host');
  });

  it('installs into a root whose executable runs and whose auth.conf keeps the data in /var/lib/sync-host', async () => {
    const binary = join(installed, 'usr', 'bin', 'sync-host');
    expect(statSync(binary).mode & 0o755).toBe(0o755);
    expect((await run(binary, ['--version'])).stdout).toBe(`${version}\n`);
    expect(readFileSync(join(installed, 'etc', 'sync-host', 'auth.conf'), 'utf8')).toMatch(
      /^DATA_DIR=\/var\/lib\/sync-host$/m,
    );
    const unit = readFileSync(
      join(installed, 'lib', 'systemd', 'system', 'sync-host.service'),
      'utf8',
    );
    expect(unit).toMatch(
      /^ExecStart=\/usr\/bin\/sync-host --headless --config-dir \/etc\/sync-host$/m,
    );
    expect(unit).toMatch(/^User=sync-host$/m);
    expect(unit).toMatch(/^StateDirectory=sync-host$/m);
  });

  it('has a unit systemd-analyze verify accepts', async (context) => {
    if ((await which('systemd-analyze')) === undefined) {
      context.skip('systemd-analyze is not installed');
    }
    // The unit as installed, its ExecStart pointing into the unpacked root (verify checks it).
    const unit = readFileSync(
      join(installed, 'lib', 'systemd', 'system', 'sync-host.service'),
      'utf8',
    );
    const check = join(temp, 'verify');
    mkdirSync(check);
    writeFileSync(
      join(check, 'sync-host.service'),
      unit.replace(
        'ExecStart=/usr/bin/sync-host',
        `ExecStart=${join(installed, 'usr', 'bin', 'sync-host')}`,
      ),
    );
    const { stdout, stderr } = await run('systemd-analyze', [
      'verify',
      '--man=no',
      join(check, 'sync-host.service'),
    ]);
    expect(`${stdout}${stderr}`).toBe('');
  });

  it('has maintainer scripts shellcheck accepts', async (context) => {
    if ((await which('shellcheck')) === undefined) context.skip('shellcheck is not installed');
    const scripts = ['postinst', 'prerm', 'postrm'].map((name) => join(control, name));
    const { stdout } = await run('shellcheck', ['--shell=sh', ...scripts]);
    expect(stdout).toBe('');
  });

  it('has maintainer scripts that make the system user and its data folder, and purge them', async (context) => {
    if (process.getuid?.() !== 0) context.skip('not root: the scripts run in a mount namespace');
    if ((await run('unshare', ['--mount', 'true']).catch(() => undefined)) === undefined) {
      context.skip('no mount namespace here (unshare --mount)');
    }
    const work = join(temp, 'maintainer');
    mkdirSync(work);
    const { stdout } = await run(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        'sh',
        join(import.meta.dirname, 'maintainer-scripts.sh'),
      ],
      { env: { ...process.env, WORK: work, ROOT: installed, CONTROL: control } },
    );
    const step = (name: string) =>
      stdout
        .split('\n')
        .find((line) => line.startsWith(`${name}: `))
        ?.slice(name.length + 2);
    // A system account (uid under 1000) without a login shell, its home the data folder.
    const user = step('user')?.split(':') ?? [];
    expect(user[0]).toBe('sync-host');
    expect(Number(user[2])).toBeLessThan(1000);
    expect(user[5]).toBe('/var/lib/sync-host');
    expect(user[6]).toMatch(/\/nologin$/);
    expect(step('group')).toMatch(/^sync-host:/);
    expect(step('data')).toBe('sync-host:sync-host 700');
    expect(step('conf')).toBe('root:sync-host 640');
    // A second configure (an upgrade) keeps the user and the data.
    expect(step('again')).toBe(`${user[2]} sync-host:sync-host 700 auth.db`);
    // remove keeps both; purge removes both.
    expect(step('removed')).toBe('sync-host auth.db');
    expect(step('purged')).toBe('user= data=');
  });

  it('is lintian-clean', async (context) => {
    if ((await which('lintian')) === undefined) context.skip('lintian is not installed');
    const { stdout } = await run('lintian', ['--allow-root', deb], { maxBuffer: 1 << 20 });
    expect(stdout).toBe('');
  }, 180_000);
});
