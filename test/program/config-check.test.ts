import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { EffectiveConfig, EffectiveEntry } from '../../server/config/effective.ts';
import { createCliRunner } from '../helpers/cli-process.ts';
import { processScope } from '../helpers/process-scope.ts';

const scope = processScope('synchost-config-check-');
const runners: Array<ReturnType<typeof createCliRunner>> = [];
afterEach(() => {
  for (const runner of runners.splice(0)) runner.killAll();
});

/** `bin/sync-host <args>` to its end, with extra environment variables. */
function sh(args: string[], dir: string, env: Record<string, string> = {}) {
  const runner = createCliRunner({ env });
  runners.push(runner);
  return runner.cli(args, dir);
}

/** A config folder with the given auth.conf and relay.conf (undefined: no such file). */
function configDir(auth: string | undefined, relay?: string): string {
  const dir = scope.tempDir();
  if (auth !== undefined) writeFileSync(join(dir, 'auth.conf'), auth);
  if (relay !== undefined) writeFileSync(join(dir, 'relay.conf'), relay);
  return dir;
}

function entry(config: EffectiveConfig, file: 'auth' | 'relay', key: string): EffectiveEntry {
  const found = config[file].find((e) => e.key === key);
  if (found === undefined) throw new Error(`no ${key} in the ${file} entries`);
  return found;
}

describe('sync-host config check', () => {
  it('labels each value with its source: the file and line, the environment variable, or the default', async () => {
    const dir = configDir(
      '# my host\nPORT=9123\nsmtp.port=25\nSMTP_HOST=mail.example.org\n',
      'rate.burst=500\n',
    );
    const env = { SMTP_PORT: '2525', MDNS: 'off' };
    const json = await sh(['config', 'check', '--config-dir', dir, '--json'], dir, env);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const config = JSON.parse(json.stdout) as EffectiveConfig;
    expect(config.configDir).toBe(dir);
    expect(config.files.auth).toEqual({ path: join(dir, 'auth.conf'), found: true });
    expect(entry(config, 'auth', 'PORT')).toMatchObject({
      value: 9123,
      source: 'file',
      file: 'auth.conf',
      line: 2,
    });
    // The environment wins over the file.
    expect(entry(config, 'auth', 'SMTP_PORT')).toMatchObject({
      value: 2525,
      source: 'env',
      variable: 'SMTP_PORT',
    });
    expect(entry(config, 'auth', 'MDNS')).toMatchObject({ value: false, source: 'env' });
    expect(entry(config, 'auth', 'DEVICE_LIMIT')).toEqual({
      key: 'DEVICE_LIMIT',
      value: 100,
      source: 'default',
    });
    expect(entry(config, 'auth', 'DATA_DIR')).toMatchObject({
      value: join(dir, 'data'),
      source: 'default',
    });
    expect(entry(config, 'relay', 'rate.burst')).toMatchObject({
      value: 500,
      source: 'file',
      file: 'relay.conf',
      line: 1,
    });
    expect(entry(config, 'relay', 'rate.perSecond')).toMatchObject({
      value: 200,
      source: 'default',
    });
    // The table says the same, one line per key.
    const text = await sh(['config', 'check', '--config-dir', dir], dir, env);
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    const line = (key: string) => lines.find((l) => l.trim().split(/\s+/)[0] === key) ?? '';
    expect(line('PORT')).toMatch(/^\s+PORT\s+auth\.conf:2\s+9123$/);
    expect(line('SMTP_PORT')).toMatch(/env SMTP_PORT\s+2525$/);
    expect(line('DEVICE_LIMIT')).toMatch(/default\s+100$/);
    expect(line('rate.burst')).toMatch(/relay\.conf:1\s+500$/);
  });

  it("takes the README's port change as written: the ports it names, from those files", async () => {
    const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
    // The ```ini blocks that start with `# auth.conf, …` and `# relay.conf` under "Changing a port".
    const section = readme.slice(readme.indexOf('Changing a port'));
    const blocks = [...section.matchAll(/```ini\n(# (auth|relay)\.conf[^\n]*\n[\s\S]*?)```/g)];
    const auth = blocks.find((b) => b[2] === 'auth')?.[1];
    const relay = blocks.find((b) => b[2] === 'relay')?.[1];
    expect(auth).toContain('PORT=9445');
    expect(relay).toContain('ws.port=9443');
    const dir = configDir(auth, relay);
    const json = await sh(['config', 'check', '--config-dir', dir, '--json'], dir);
    expect(json.stderr).toBe('');
    const config = JSON.parse(json.stdout) as EffectiveConfig;
    expect(entry(config, 'auth', 'PORT')).toMatchObject({ value: 9445, source: 'file' });
    expect(entry(config, 'relay', 'ws.port')).toMatchObject({ value: 9443, source: 'file' });
    expect(entry(config, 'relay', 'status.port')).toMatchObject({ value: 9444, source: 'file' });
    // The flag the README says is refused is refused, naming the key.
    const flag = await sh(['--port', '9445'], dir);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('PORT in auth.conf');
    expect(readme).toContain('`sync-host --port 9445` is refused with the key it belongs');
  });

  it('names the spelling a file used, and warns about an unknown key naming the closest one', async () => {
    const dir = configDir('db.user=someone\nDB_PASWORD=x\n');
    const res = await sh(['config', 'check', '--config-dir', dir, '--json'], dir);
    expect(res.code).toBe(0);
    const config = JSON.parse(res.stdout) as EffectiveConfig;
    expect(entry(config, 'auth', 'DB_USER')).toMatchObject({
      value: 'someone',
      source: 'file',
      line: 1,
      spelling: 'db.user',
    });
    expect(config.warnings).toEqual([
      'unknown configuration key ignored: auth.conf:2: DB_PASWORD (did you mean DB_PASSWORD?)',
    ]);
  });

  it('never prints a password or a secret, whether from a file or the environment', async () => {
    const secrets = {
      dbPass: 'db-pass-Zq81xkq',
      smtpPass: 'smtp-pass-Lm42vvr',
      authSecret: 'auth-secret-Pf77wwe-0123456789abcdef0123456789abcdef',
      relaySecret: 'relay-secret-Ab19ppo-0123456789abcdef0123456789abcdef',
      urlPassword: 'url-pass-Ke55ttu',
      storePassword: 'store-pass-Wu63rrb',
    };
    const dir = configDir(
      [
        'DB_HOST=127.0.0.1',
        'DB_USER=sync',
        `DB_PASSWORD="${secrets.dbPass}"`,
        'DB_NAME=sync',
        `AUTH_BASE_URL=https://admin:${secrets.urlPassword}@sync.example.org`,
        'SMTP_HOST=mail.example.org',
        `smtp.password=${secrets.smtpPass}`,
      ].join('\n'),
      `auth.secret=${secrets.relaySecret}\nstore.url=postgres://sync:${secrets.storePassword}@10.0.0.9/store\n`,
    );
    const env = { AUTH_SECRET: secrets.authSecret };
    for (const args of [[], ['--json']]) {
      const res = await sh(['config', 'check', '--config-dir', dir, ...args], dir, env);
      expect(res.code).toBe(0);
      for (const secret of Object.values(secrets)) {
        expect(res.stdout).not.toContain(secret);
        expect(res.stderr).not.toContain(secret);
      }
      expect(res.stdout).toContain('****');
    }
    const config = JSON.parse(
      (await sh(['config', 'check', '--config-dir', dir, '--json'], dir, env)).stdout,
    ) as EffectiveConfig;
    expect(entry(config, 'auth', 'DB_PASS')).toMatchObject({
      value: '****',
      secret: true,
      length: secrets.dbPass.length,
      source: 'file',
      spelling: 'DB_PASSWORD',
    });
    expect(entry(config, 'auth', 'AUTH_SECRET')).toMatchObject({
      value: '****',
      source: 'env',
      variable: 'AUTH_SECRET',
    });
    expect(entry(config, 'relay', 'auth.secret')).toMatchObject({ value: '****', secret: true });
    expect(entry(config, 'auth', 'AUTH_BASE_URL').value).toBe(
      'https://admin:****@sync.example.org',
    );
    expect(entry(config, 'relay', 'store.url').value).toBe('postgres://sync:****@10.0.0.9/store');
    expect(config.warnings).toContain(
      'relay.conf auth.secret differs from the auth service secret: devices will fail to authenticate with the relay',
    );
  });

  it('exits 2 on a bad configuration with the lines the host prints at start', async () => {
    const dir = configDir('PORT=lots\nSIGNUP=closed\n', 'ws.port=99999\n');
    const check = await sh(['config', 'check', '--config-dir', dir], dir);
    const serve = await sh(['--headless', '--config-dir', dir], dir);
    expect(serve.code).toBe(2);
    expect(check.code).toBe(2);
    expect(check.stdout).toBe('');
    expect(check.stderr).toBe(serve.stderr);
    expect(check.stderr.trim().split('\n')).toEqual([
      'sync-host: auth.conf:1: PORT: must be a port number',
      'sync-host: auth.conf:2: SIGNUP: must be open or allowlist',
      'sync-host: relay.conf:1: ws.port: must be a port number between 1 and 65535',
    ]);
    const relayOnly = configDir('', 'ws.port=99999\n');
    const relay = await sh(['config', 'check', '--config-dir', relayOnly], relayOnly);
    expect(relay.code).toBe(2);
    expect(relay.stderr).toBe(
      'sync-host: relay.conf:1: ws.port: must be a port number between 1 and 65535\n',
    );
  });

  it('refuses a config folder that does not exist, creating nothing', async () => {
    const parent = scope.tempDir();
    const missing = join(parent, 'nope');
    const res = await sh(['config', 'check', '--config-dir', missing], parent);
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(`sync-host: --config-dir: ${missing} does not exist\n`);
    expect(existsSync(missing)).toBe(false);
  });

  describe('starts nothing', () => {
    let database: Server;
    let connections = 0;
    afterAll(() => database?.close());

    it('opens no database connection and creates no data folder', async () => {
      // Stands in for a database server: it only counts who connects.
      database = createServer((socket) => {
        connections++;
        socket.destroy();
      });
      database.listen(0, '127.0.0.1');
      await once(database, 'listening');
      const address = database.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      const dir = configDir(
        [
          'DB_HOST=127.0.0.1',
          `DB_PORT=${port}`,
          'DB_USER=sync',
          'DB_PASS=',
          'DB_NAME=sync',
          'AUTH_SECRET=s-0123456789abcdef0123456789abcdef',
          'AUTH_BASE_URL=http://127.0.0.1:1',
        ].join('\n'),
      );
      const res = await sh(['config', 'check', '--config-dir', dir], dir);
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(/DB_PORT\s+auth\.conf:2\s+\d+/);
      expect(connections).toBe(0);
      expect(existsSync(join(dir, 'data'))).toBe(false);
    });
  });

  it('is listed in sync-host --help, which points to docs/configuration.md', async () => {
    const dir = configDir(undefined);
    const res = await sh(['--help'], dir);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^ {2}config check .*docs\/configuration\.md/m);
  });

  it('rejects an unknown config command with exit 2', async () => {
    const dir = configDir(undefined);
    const res = await sh(['config', 'show'], dir);
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      'sync-host config: unknown command "show"; the command is: sync-host config check\n',
    );
  });

  it('takes --config-dir before the word config as well as after it', async () => {
    const dir = configDir('PORT=9100\n');
    for (const args of [
      ['--config-dir', dir, 'config', 'check', '--json'],
      [`--config-dir=${dir}`, 'config', 'check', '--json'],
    ]) {
      const res = await sh(args, scope.tempDir());
      expect(res.code).toBe(0);
      const config = JSON.parse(res.stdout) as EffectiveConfig;
      expect(entry(config, 'auth', 'PORT').value).toBe(9100);
    }
  });
});
