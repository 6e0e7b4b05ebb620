import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config/load.ts';
import { writeConf } from '../helpers/configs.ts';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-secret-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Runs bin/sync-host to its exit. */
function run(args: string[], cwd: string, env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    execFile(
      process.execPath,
      [launcher, ...args],
      { cwd, timeout: 30_000, env: { ...process.env, LOG_LEVEL: 'error', ...env } },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        done({ code, stdout, stderr });
      },
    );
  });
}

const advice = 'set it to the output of `openssl rand -hex 32`';

describe('a weak shared secret', () => {
  it('from the README (AUTH_SECRET=a-long-random-string) stops the start: exit 2, one line, nothing created', async () => {
    const dir = tempDir();
    writeConf(dir, 'auth.conf', { AUTH_SECRET: 'a-long-random-string', PORT: 0, MDNS: 'off' });
    const res = await run(['--headless', '--config-dir', dir], dir);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr.trim().split('\n')).toEqual([
      `sync-host: auth.conf:1: AUTH_SECRET: is the placeholder from the documentation; ${advice}`,
    ]);
    expect(readdirSync(dir)).toEqual(['auth.conf']);
  });

  it('shorter than 32 bytes, in the environment or relay.conf, stops the start without showing it', async () => {
    const dir = tempDir();
    writeConf(dir, 'auth.conf', { PORT: 0, MDNS: 'off' });
    const fromEnv = await run(['--headless', '--config-dir', dir], dir, {
      AUTH_SECRET: 'hunter2-hunter2-hunter2-hunter2',
    });
    expect(fromEnv.code, fromEnv.stderr).toBe(2);
    expect(fromEnv.stderr.trim().split('\n')).toEqual([
      `sync-host: environment: AUTH_SECRET: is 31 bytes long, shorter than the 32 it needs; ${advice}`,
    ]);
    expect(fromEnv.stderr).not.toContain('hunter2');
    writeConf(dir, 'relay.conf', { 'auth.secret': 'relay-hunter2', 'ws.port': 0 });
    const relay = await run(['relay', '--config-dir', dir], dir);
    expect(relay.code, relay.stderr).toBe(2);
    expect(relay.stderr.trim().split('\n')).toEqual([
      `sync-host: relay.conf:1: auth.secret: is 13 bytes long, shorter than the 32 it needs; ${advice}`,
    ]);
    expect(relay.stderr).not.toContain('hunter2');
  });

  it('is any placeholder in angle brackets, whatever its length; 32 random bytes and an empty relay secret pass', () => {
    const dir = tempDir();
    const load = (auth: Record<string, string>, relay: Record<string, string> = {}) => {
      writeConf(dir, 'auth.conf', auth);
      writeConf(dir, 'relay.conf', relay);
      return () => loadConfig(dir, {});
    };
    expect(load({ AUTH_SECRET: '<output of openssl rand -hex 32, the same everywhere>' })).toThrow(
      /AUTH_SECRET: is the placeholder from the documentation/,
    );
    const strong = randomBytes(32).toString('hex');
    expect(load({ AUTH_SECRET: strong }, { 'auth.secret': strong })().auth.authSecret).toBe(strong);
    expect(load({ AUTH_SECRET: 'x'.repeat(32) })().auth.authSecret).toBe('x'.repeat(32));
    // empty: the generated secret (auth), development mode (relay)
    expect(load({ AUTH_SECRET: '' }, { 'auth.secret': '' })().relay.secret).toBe('');
  });
});
