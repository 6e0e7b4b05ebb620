import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { dbTargets } from '../helpers/databases.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');
const targets = await dbTargets();
const skipOf = (name: string) => targets.find((t) => t.name === name)?.skip;

const dirs: string[] = [];
const hosts: HostProcess[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-mistake-'));
  dirs.push(dir);
  return dir;
};
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.stop('SIGKILL').catch(() => {});
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Runs bin/sync-host to its exit (logs above `error` silenced, as a user's LOG_LEVEL may be). */
function run(args: string[], cwd: string, timeoutMs = 30_000) {
  const started = Date.now();
  return new Promise<{ code: number | null; stdout: string; stderr: string; ms: number }>(
    (done) => {
      execFile(
        process.execPath,
        [launcher, ...args],
        { cwd, timeout: timeoutMs, env: { ...process.env, LOG_LEVEL: 'error' } },
        (err, stdout, stderr) => {
          const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
          done({ code, stdout, stderr, ms: Date.now() - started });
        },
      );
    },
  );
}

/** An auth.conf for an external database; everything else as a real install would set it. */
function externalDb(dir: string, db: Record<string, string | number>) {
  writeConf(dir, 'auth.conf', {
    DB_HOST: '127.0.0.1',
    AUTH_SECRET: 'a-long-random-string-for-the-tests',
    AUTH_BASE_URL: 'http://127.0.0.1:1',
    PORT: 0,
    MDNS: 'off',
    TLS: 'off',
    ...db,
  });
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('first-run mistakes exit 2 with one line', () => {
  it('refuses a --config-dir that does not exist, naming it, and creates nothing', async () => {
    const cwd = tempDir();
    const missing = join(cwd, 'sync-hots');
    const res = await run(['--headless', '--config-dir', missing], cwd);
    expect(res.code).toBe(2);
    expect(res.stderr.trim().split('\n')).toEqual([
      `sync-host: --config-dir: ${missing} does not exist`,
    ]);
    expect(existsSync(missing)).toBe(false);
    expect(readdirSync(cwd)).toEqual([]);
  });

  const mistakes = [
    {
      driver: 'postgres',
      what: 'a role the server does not know',
      db: { DB_USER: 'no_such_role', DB_PASS: 'x', DB_NAME: 'test' },
      line: /^sync-host: auth\.conf: DB_USER\/DB_PASS: postgres at 127\.0\.0\.1:5432 refused the credentials of user "no_such_role" \(.+\)$/,
    },
    {
      driver: 'postgres',
      what: 'a database that does not exist',
      db: { DB_USER: 'postgres', DB_PASS: '', DB_NAME: 'no_such_database' },
      line: /^sync-host: auth\.conf: DB_NAME: postgres at 127\.0\.0\.1:5432 has no database "no_such_database"/,
    },
    {
      driver: 'mysql',
      what: 'a wrong password',
      db: { DB_USER: 'root', DB_PASS: 'wrong-password', DB_NAME: 'test' },
      line: /^sync-host: auth\.conf: DB_USER\/DB_PASS: mysql at 127\.0\.0\.1:3306 refused the credentials of user "root" \(Access denied/,
    },
    {
      driver: 'mysql',
      what: 'a database that does not exist',
      db: { DB_USER: 'root', DB_PASS: '', DB_NAME: 'no_such_database' },
      line: /^sync-host: auth\.conf: DB_NAME: mysql at 127\.0\.0\.1:3306 has no database "no_such_database"/,
    },
  ] as const;
  for (const m of mistakes) {
    it.skipIf(skipOf(m.driver) !== undefined)(
      `exits 2 within 15 s naming the key for ${m.what} (${m.driver})`,
      async () => {
        const dir = tempDir();
        externalDb(dir, { DB_DRIVER: m.driver, ...m.db });
        const res = await run(['auth', '--config-dir', dir], dir);
        expect(res.code, res.stderr).toBe(2);
        expect(res.ms).toBeLessThan(15_000);
        expect(res.stderr.trim().split('\n')).toEqual([expect.stringMatching(m.line)]);
        expect(res.stderr).not.toContain('wrong-password');
        expect(res.stdout).toBe('');
      },
      30_000,
    );
  }
});

describe('a database that cannot be reached yet', () => {
  for (const driver of ['postgres', 'mysql'] as const) {
    it(`is retried with a log line while /health answers 503 (${driver}, closed port)`, async () => {
      const dir = tempDir();
      const port = await closedPort();
      const authPort = await closedPort();
      externalDb(dir, {
        DB_DRIVER: driver,
        DB_PORT: port,
        DB_USER: 'sync',
        DB_PASS: '',
        DB_NAME: 'sync',
        PORT: authPort,
      });
      const host = await startHostProcess(['auth'], dir);
      hosts.push(host);
      const retrying = await eventually(
        () => host.stderr.find((l) => l.includes('database unreachable at start')),
        'the retry log line',
        15_000,
      );
      expect(JSON.parse(retrying)).toMatchObject({ level: 'error' });
      const health = await fetch(`http://127.0.0.1:${authPort}/health`);
      expect(health.status).toBe(503);
      // Still retrying, not exited: a host may start before its database.
      expect(host.child.exitCode).toBeNull();
    });
  }

  for (const [signal, driver] of [
    ['SIGTERM', 'postgres'],
    ['SIGINT', 'mysql'],
  ] as const) {
    it(`stops at ${signal} while retrying: exit 0 within 5 s, no error (${driver})`, async () => {
      const dir = tempDir();
      externalDb(dir, {
        DB_DRIVER: driver,
        DB_PORT: await closedPort(),
        DB_USER: 'sync',
        DB_PASS: '',
        DB_NAME: 'sync',
        LOG_LEVEL: 'info',
      });
      const host = await startHostProcess(['auth'], dir, { env: { LOG_LEVEL: 'info' } });
      hosts.push(host);
      await eventually(
        () => host.stderr.some((l) => l.includes('database unreachable at start')),
        'the retry log line',
        15_000,
      );
      // stop() fails past its 5 s deadline; the exit is the other shutdowns' 0.
      expect(await host.stop(signal)).toBe(0);
      const lines = host.stderr
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toContain('shutting down');
      expect(lines.map((l) => l.msg).filter((m) => /cannot start|took longer/.test(m))).toEqual([]);
      expect(host.stdout.join('')).toBe('');
    });
  }
});

describe('an unknown configuration key', () => {
  it('is a warning that names the close known key, and the host starts', async () => {
    const dir = tempDir();
    writeConf(dir, 'auth.conf', {
      PORT: 0,
      MDNS: 'off',
      DEFAULT_TEIR: 'pro',
      FANCY_FEATURE: 1,
      TLS: 'off',
    });
    writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0, 'rate.persecnd': 5 });
    const host = await startHostProcess(['--headless'], dir);
    hosts.push(host);
    await host.url('admin');
    const warnings = host.stderr.filter((l) => l.includes('unknown configuration key'));
    expect(warnings.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual([
      'unknown configuration key ignored: auth.conf:3: DEFAULT_TEIR (did you mean DEFAULT_TIER?)',
      'unknown configuration key ignored: auth.conf:4: FANCY_FEATURE',
      'unknown configuration key ignored: relay.conf:3: rate.persecnd (did you mean rate.perSecond?)',
    ]);
    expect(warnings.every((l) => (JSON.parse(l) as { level: string }).level === 'warn')).toBe(true);
  });
});
