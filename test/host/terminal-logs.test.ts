import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');
// util-linux `script` runs a command on a real pseudo-terminal, as a person's terminal is.
const hasScript = spawnSync('script', ['--version']).status === 0;

const dirs: string[] = [];
const stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function hostDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-tty-'));
  dirs.push(dir);
  writeConf(dir, 'auth.conf', { PORT: 0, MDNS: 'off', TLS: 'off' });
  writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
  return dir;
}

/** `npm start` on a terminal: bin/sync-host under `script`, every byte it shows collected. */
function onTerminal(dir: string, args: string[], env: Record<string, string> = {}) {
  const command = [process.execPath, launcher, ...args, '--config-dir', dir]
    .map((part) => `'${part}'`)
    .join(' ');
  const { LOG_LEVEL: _inherited, ...inherited } = process.env;
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: dir,
    detached: true,
    env: { ...inherited, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const screen = { text: '' };
  child.stdout.on('data', (d: Buffer) => {
    screen.text += d.toString().replace(/\r/g, '');
  });
  stops.push(() => {
    if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  });
  return screen;
}

describe.skipIf(!hasScript)('log lines on a terminal', () => {
  it('are short human lines between the URLs, with level, message and key fields, no JSON', async () => {
    const screen = onTerminal(hostDir(), ['--headless']);
    await eventually(
      () => (/sync-host started/.test(screen.text) ? true : undefined),
      'start',
      20_000,
    );
    const lines = screen.text.trim().split('\n');
    expect(lines.filter((l) => l.trimStart().startsWith('{'))).toEqual([]);
    // Without SMTP: a mode, said once at info level, not a warning.
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^\d\d:\d\d:\d\d INFO {2}e-mail sign-in links are shown here and in the admin UI \(no SMTP configured; to send them by e-mail set SMTP_HOST in auth\.conf, see docs\/configuration\.md\)$/,
      ),
    );
    expect(lines.filter((l) => / WARN /.test(l))).toEqual([]);
    expect(lines).toContainEqual(
      expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}relay listening wsPort=\d+ statusPort=\d+/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^\d\d:\d\d:\d\d INFO {2}sync-host started mode=headless$/),
    );
    expect(lines).toContainEqual(expect.stringMatching(/^admin: {2}http:\/\/.+\/admin\/#token=/));
  });

  it('follow --log-level and LOG_LEVEL', async () => {
    // A key this version does not know: a warning at start.
    const warnDir = hostDir();
    writeConf(warnDir, 'auth.conf', {
      PORT: 0,
      MDNS: 'off',
      SMTP_HOTS: 'mail.example.org',
      TLS: 'off',
    });
    const warn = onTerminal(warnDir, ['--headless', '--log-level', 'warn']);
    const quiet = onTerminal(hostDir(), ['--headless'], { LOG_LEVEL: 'error' });
    await eventually(() => (/^admin:/m.test(warn.text) ? true : undefined), 'warn start', 20_000);
    await eventually(() => (/^admin:/m.test(quiet.text) ? true : undefined), 'quiet start', 20_000);
    expect(warn.text).toMatch(
      /^\d\d:\d\d:\d\d WARN {2}unknown configuration key ignored: auth\.conf:3: SMTP_HOTS \(did you mean SMTP_HOST\?\)$/m,
    );
    expect(warn.text).not.toMatch(/^\d\d:\d\d:\d\d INFO /m);
    expect(quiet.text).not.toMatch(/^\d\d:\d\d:\d\d (INFO|WARN) /m);
    expect(quiet.text).toMatch(/^admin: {2}http/m);
  });
});

describe('log lines into a pipe', () => {
  it('stay one JSON object per line (journald, log collectors)', async () => {
    const host = await startHostProcess(['--headless'], hostDir(), { env: { LOG_LEVEL: 'info' } });
    stops.push(() => host.child.kill('SIGKILL'));
    await host.url('admin');
    expect(host.stderr.length).toBeGreaterThan(0);
    for (const line of host.stderr.filter((l) => l !== '')) {
      expect(JSON.parse(line)).toMatchObject({
        level: expect.any(String),
        msg: expect.any(String),
      });
    }
  });
});
