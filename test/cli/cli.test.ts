import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { version } from '../../server/version.ts';
import { writeConf } from '../helpers/configs.ts';
import { startHostProcess } from '../helpers/host-process.ts';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');
const run = (args: string[], cwd: string) =>
  spawnSync(process.execPath, [launcher, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
const tempDir = () => mkdtempSync(join(tmpdir(), 'synchost-cli-'));

describe('command line', () => {
  it('prints the version and the usage with exit 0', () => {
    const v = run(['--version'], tempDir());
    expect(v.status).toBe(0);
    expect(v.stdout.trim()).toBe(version);
    const help = run(['--help'], tempDir());
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--headless');
  });

  it('refuses an unknown command or option with exit 2 and one line', () => {
    for (const args of [['frobnicate'], ['--frobnicate']]) {
      const res = run(args, tempDir());
      expect(res.status).toBe(2);
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('exits 2 with one line naming file, line and key for a bad number, without a stack trace', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'auth.conf'), '# sync-host\nPORT=8445\nSMTP_PORT=lots\n');
    const res = run(['auth'], dir);
    expect(res.status).toBe(2);
    expect(res.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^sync-host: auth\.conf:3: SMTP_PORT: must be a port number/),
    ]);
    expect(res.stderr).not.toMatch(/\n\s+at /);
    expect(res.stdout).toBe('');
  });

  it('exits 2 naming each missing key when DB_HOST is set without the rest', () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, 'auth.conf'),
      'DB_HOST=127.0.0.1\nDB_USER=postgres\nDB_PASS=\nAUTH_SECRET=x\nAUTH_BASE_URL=http://h\n',
    );
    const res = run(['auth', '--config-dir', dir], tempDir());
    expect(res.status).toBe(2);
    expect(res.stderr.trim()).toBe(
      'sync-host: auth.conf: DB_NAME: DB_NAME is required when DB_HOST is set',
    );
  });

  it('exits 2 naming the port when it is already in use', async () => {
    const first = tempDir();
    writeConf(first, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off' });
    const host = await startHostProcess(['auth'], first);
    try {
      const port = new URL(await host.url('auth')).port;
      const second = tempDir();
      writeConf(second, 'auth.conf', { PORT: port, BIND: '127.0.0.1', MDNS: 'off' });
      const res = run(['auth'], second);
      expect(res.status).toBe(2);
      const userLines = res.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{'));
      expect(userLines).toEqual([
        `sync-host: port ${port} is already in use; stop the other program or set PORT in auth.conf to a free port`,
      ]);
    } finally {
      expect(await host.stop('SIGTERM')).toBe(0);
    }
  });

  it('serves the auth contract from `sync-host auth` with generated secret files (0600) and the dev-mode line on stdout', async () => {
    const dir = tempDir();
    writeConf(dir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off' });
    const host = await startHostProcess(['auth'], dir);
    try {
      const url = await host.url('auth');
      expect((await fetch(`${url}/health`)).status).toBe(200);
      for (const file of ['secret', 'admin-token']) {
        expect(statSync(join(dir, 'data', file)).mode & 0o777).toBe(0o600);
        expect(readFileSync(join(dir, 'data', file), 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
      }
      expect((await fetch(`${url}/auth/login?email=cli@example.com`)).status).toBe(200);
      const line = await host.line('[dev] Magic link token for cli@example.com: ');
      const token = line.split(': ')[1];
      const verify = await fetch(`${url}/auth/verify?token=${token}&deviceName=cli&platform=linux`);
      const { deviceToken } = (await verify.json()) as { deviceToken: string };
      const me = await fetch(`${url}/auth/device`, {
        headers: { authorization: `Bearer ${deviceToken}` },
      });
      expect(me.status).toBe(200);
      const wellKnown = (await (await fetch(`${url}/.well-known/sync-host`)).json()) as Record<
        string,
        string | boolean
      >;
      expect(wellKnown).toEqual({
        authUrl: url,
        relayUrl: expect.stringMatching(/^ws:\/\//),
        version,
        smtp: false,
      });
    } finally {
      expect(await host.stop('SIGTERM')).toBe(0);
    }
  });
});
