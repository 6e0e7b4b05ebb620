import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, hostDir, startHostProcess } from '../helpers/host-process.ts';

const run = promisify(execFile);
const launcher = resolve(import.meta.dirname, '../../bin/sync-host');

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempHostDir(): string {
  const dir = hostDir();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function started(dir: string): Promise<HostProcess> {
  const host = await startHostProcess(['--headless'], dir);
  cleanups.push(() => host.stop('SIGTERM'));
  await host.url('auth');
  return host;
}

/** Runs `bin/sync-host --headless` to its exit; resolves with the code and stderr. */
async function runToExit(dir: string, options: { uid?: number; gid?: number } = {}) {
  const child = spawn(process.execPath, [launcher, '--headless', '--config-dir', dir], {
    cwd: dir,
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options,
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stderr };
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  if (child.pid === undefined) throw new Error('no pid');
  return child.pid;
}

const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();

describe('the data folder lock', () => {
  it('refuses a second host on a data folder in use: exit 2, one line, the first one unharmed', async () => {
    const dir = tempHostDir();
    const first = await started(dir);
    const second = await runToExit(dir);
    expect(second.code).toBe(2);
    const lines = second.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^sync-host: .*data: DATA_DIR: the data folder is in use by another running sync-host \\(pid ${first.child.pid}\\)`,
      ),
    );
    expect((await fetch(`${await first.url('auth')}/health`)).status).toBe(200);
    // The lock is the first host's still, and is gone when it stops.
    const lock = join(dir, 'data', 'auth.lock');
    expect(readFileSync(lock, 'utf8').split('\n')[0]).toBe(String(first.child.pid));
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(existsSync(lock)).toBe(false);
  });

  it('takes over a lock left by a process that is gone', async () => {
    const dir = tempHostDir();
    mkdirSync(join(dir, 'data'), { mode: 0o700 });
    writeFileSync(join(dir, 'data', 'auth.lock'), `${await deadPid()}\n${bootId}\n`);
    // A running pid, but from an earlier boot: the pid was reused after a reboot.
    writeFileSync(join(dir, 'data', 'relay.lock'), `${process.pid}\nearlier-boot\n`);
    const host = await started(dir);
    expect(readFileSync(join(dir, 'data', 'auth.lock'), 'utf8').split('\n')[0]).toBe(
      String(host.child.pid),
    );
    expect(readFileSync(join(dir, 'data', 'relay.lock'), 'utf8').split('\n')[0]).toBe(
      String(host.child.pid),
    );
  });

  it('lets an auth process and a relay process share one data folder', async () => {
    const dir = tempHostDir();
    const auth = await startHostProcess(['auth'], dir);
    cleanups.push(() => auth.stop('SIGTERM'));
    await auth.url('auth');
    const relay = await startHostProcess(['relay'], dir);
    cleanups.push(() => relay.stop('SIGTERM'));
    await relay.url('relay');
  });

  it('refuses a data folder this user cannot write: exit 2 with the chown that fixes it', async () => {
    const dir = tempHostDir();
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o700 });
    // As root, permissions do not apply: the host runs as nobody, on a folder that is root's.
    const asRoot = process.getuid?.() === 0;
    const user = asRoot ? { uid: 65_534, gid: 65_534 } : {};
    if (asRoot) {
      chmodSync(dir, 0o755);
      for (const file of ['auth.conf', 'relay.conf']) chmodSync(join(dir, file), 0o644);
    } else {
      chmodSync(data, 0o500);
      cleanups.push(() => chmodSync(data, 0o700));
    }
    writeConf(dir, 'auth.conf', {
      PORT: 0,
      BIND: '127.0.0.1',
      MDNS: 'off',
      DATA_DIR: data,
    });
    if (asRoot) chmodSync(join(dir, 'auth.conf'), 0o644);
    const { code, stderr } = await runToExit(dir, user);
    expect(code).toBe(2);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    const name = asRoot ? 'nobody' : (await run('id', ['-un'])).stdout.trim();
    expect(lines[0]).toBe(
      `sync-host: ${data}: DATA_DIR: this user cannot write the data folder (EACCES); give it to this user: sudo chown -R ${name} ${data}`,
    );
    // Nothing was created in it.
    expect(statSync(data).nlink).toBe(2);
  });
});
