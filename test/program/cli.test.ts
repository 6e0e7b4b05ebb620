import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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
      'DB_HOST=127.0.0.1\nDB_USER=postgres\nDB_PASS=\nAUTH_SECRET=x-0123456789abcdef0123456789abcdef\nAUTH_BASE_URL=http://h\n',
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

describe('command-line mistakes are answered like configuration mistakes', () => {
  /** Runs bin/sync-host in an empty folder; the mistake must be refused before anything starts. */
  const refused = (args: string[]) => {
    const cwd = tempDir();
    const res = run(args, cwd);
    expect(res.status, res.stderr).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).not.toMatch(/\n\s+at /);
    // Nothing was created: no data folder, no database.
    expect(readdirSync(cwd)).toEqual([]);
    return res.stderr.split('\n').filter((l) => l !== '');
  };

  it('names the option a misspelt one was meant to be', () => {
    expect(refused(['--headles'])).toEqual([
      'sync-host: unknown option --headles: did you mean --headless? (see sync-host --help)',
    ]);
    expect(refused(['--headless', '--confg-dir', 'x'])).toEqual([
      'sync-host: unknown option --confg-dir: did you mean --config-dir? (see sync-host --help)',
    ]);
    // Too far from --config-dir for the edit distance, but no other option begins so.
    expect(refused(['--config', 'x'])).toEqual([
      'sync-host: unknown option --config: did you mean --config-dir? (see sync-host --help)',
    ]);
    expect(refused(['--verbose'])).toEqual([
      'sync-host: unknown option --verbose (see sync-host --help)',
    ]);
  });

  it('names the command a misspelt one was meant to be, a client command among them', () => {
    expect(refused(['lgoin'])).toEqual([
      'sync-host: unknown command lgoin: did you mean login? (see sync-host --help)',
    ]);
    expect(refused(['relya'])).toEqual([
      'sync-host: unknown command relya: did you mean relay? (see sync-host --help)',
    ]);
    expect(refused(['frobnicate'])).toEqual([
      'sync-host: unknown command frobnicate (see sync-host --help)',
    ]);
    expect(refused(['--relay'])).toEqual([
      'sync-host: unknown option --relay: did you mean sync-host relay? (see sync-host --help)',
    ]);
    expect(refused(['--auth', 'http://192.168.1.5:8445'])).toEqual([
      'sync-host: unknown option --auth: did you mean sync-host auth, or sync-host login --auth URL? (see sync-host --help)',
    ]);
  });

  it('says where a setting given as a flag belongs, without repeating its value', () => {
    const seeDocs = 'see docs/configuration.md';
    expect(refused(['--headless', '--port', '9000'])).toEqual([
      `sync-host: --port is not an option: the auth port is PORT in auth.conf (or the PORT environment variable); ${seeDocs}`,
    ]);
    expect(refused(['--data-dir', '/srv/sync'])).toEqual([
      `sync-host: --data-dir is not an option: the data folder is DATA_DIR in auth.conf (or the DATA_DIR environment variable); ${seeDocs}`,
    ]);
    expect(refused(['--mdns'])).toEqual([
      `sync-host: --mdns is not an option: LAN discovery (mDNS) is MDNS in auth.conf (or the MDNS environment variable); ${seeDocs}`,
    ]);
    expect(refused(['--bind', '127.0.0.1'])).toEqual([
      `sync-host: --bind is not an option: the listen address is BIND in auth.conf (or the BIND environment variable), bind in relay.conf for the relay alone; ${seeDocs}`,
    ]);
    expect(refused(['relay', '--ws-port', '9443'])).toEqual([
      `sync-host: --ws-port is not an option: the relay port is ws.port in relay.conf; ${seeDocs}`,
    ]);
    // The relay alone: its port, not the auth service's; other words for the ports.
    expect(refused(['relay', '--port', '9443'])).toEqual([
      `sync-host: --port is not an option: the relay port is ws.port in relay.conf; ${seeDocs}`,
    ]);
    expect(refused(['--relay-port', '9443'])).toEqual([
      `sync-host: --relay-port is not an option: the relay port is ws.port in relay.conf; ${seeDocs}`,
    ]);
    expect(refused(['--status-port', '9444'])).toEqual([
      `sync-host: --status-port is not an option: the relay's status port is status.port in relay.conf; ${seeDocs}`,
    ]);
    expect(refused(['auth', '--auth-port', '9445'])).toEqual([
      `sync-host: --auth-port is not an option: the auth port is PORT in auth.conf (or the PORT environment variable); ${seeDocs}`,
    ]);
    expect(refused(['--db-url', 'postgres://sync:pw@db/sync'])).toEqual([
      `sync-host: --db-url is not an option: the database is set by DB_HOST, DB_USER, DB_PASS, DB_NAME, DB_DRIVER, DB_PORT and DB_PATH in auth.conf; ${seeDocs}`,
    ]);
    expect(refused(['--prot', '9000'])).toEqual([
      'sync-host: unknown option --prot: did you mean PORT in auth.conf? (see docs/configuration.md)',
    ]);
    const secret = refused(['--secret=hunter2-very-secret']);
    expect(secret).toEqual([
      `sync-host: --secret is not an option: the shared secret is AUTH_SECRET in auth.conf (or the AUTH_SECRET environment variable), auth.secret in relay.conf for the relay alone; ${seeDocs}`,
    ]);
  });

  it('refuses an option without its value, or a switch given one', () => {
    expect(refused(['--headless', '--config-dir'])).toEqual([
      'sync-host: --config-dir needs a value (see sync-host --help)',
    ]);
    expect(refused(['--config-dir', '--headless'])).toEqual([
      'sync-host: --config-dir needs a value (see sync-host --help)',
    ]);
    expect(refused(['--headless=yes'])).toEqual([
      'sync-host: --headless takes no value (see sync-host --help)',
    ]);
  });
});
