import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliRunner } from '../helpers/cli-process.ts';
import { hostDir, type RunningHost, startHostProgram } from '../helpers/host-process.ts';
import { hasScript, spawnInTerminal, type TerminalRun } from '../helpers/terminal.ts';
import { eventually } from '../helpers/wait.ts';

const dirs: string[] = [];
const { spawnCli, cli, killAll } = createCliRunner();
const terminals: TerminalRun[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sync-consent-'));
  dirs.push(dir);
  return dir;
};

let host: RunningHost;
let adminToken: string;
const stranger = tempDir();

const adminCall = async (method: string, path: string, body?: unknown) =>
  fetch(`${host.authUrl}/admin/api${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const deviceNames = async () =>
  (
    (await (await adminCall('GET', '/devices')).json()) as {
      devices: Array<{ deviceName: string }>;
    }
  ).devices.map((d) => d.deviceName);

/** `login` in a terminal (a person at it), until it shows its pairing code. */
async function loginInTerminal(deviceName: string): Promise<{ run: TerminalRun; code: string }> {
  const run = spawnInTerminal(
    ['login', '--auth', host.authUrl, '--device-name', deviceName],
    tempDir(),
  );
  terminals.push(run);
  await eventually(() => /Pairing code: +[A-Z]{4}-[A-Z]{4}/.test(run.out.text), 'a code', 30_000);
  return { run, code: /Pairing code: +([A-Z]{4}-[A-Z]{4})/.exec(run.out.text)?.[1] ?? '' };
}

beforeAll(async () => {
  const dir = hostDir();
  dirs.push(dir);
  host = await startHostProgram(dir);
  adminToken = readFileSync(join(dir, 'data', 'admin-token'), 'utf8').trim();
  // the stranger's own device, approved by the administrator
  const login = spawnCli(['login', '--auth', host.authUrl, '--device-name', 'desk'], stranger);
  const code = await login.code();
  expect(
    (await adminCall('POST', '/pairings/approve', { code, email: 'stranger@example.org' })).status,
  ).toBe(200);
  expect(await login.exited).toBe(0);
}, 90_000);

afterAll(async () => {
  killAll();
  for (const run of terminals) if (run.child.exitCode === null) run.child.kill('SIGKILL');
  await host?.process.stop('SIGKILL').catch(() => null);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!hasScript)(
  'pairing approved by another person device',
  { timeout: 90_000 },
  () => {
    it('shows the login at the terminal the account it would join; declined, nothing joins it', async () => {
      const { run, code } = await loginInTerminal('victim laptop');
      const approve = await cli(['pair', 'approve', code], stranger);
      expect(approve.code, approve.stderr).toBe(0);
      expect(approve.stderr).toContain(`Waiting with ${code}: "victim laptop"`);
      await eventually(
        () => run.out.text.includes('Join the account stranger@example.org? (y/n)'),
        'the question',
        30_000,
      );
      expect(run.out.text).toContain(
        'The device "desk" approved this device into the account stranger@example.org.',
      );
      run.type('n\r');
      expect(await run.exited).toBe(1);
      expect(run.out.text).toContain('did not join the account stranger@example.org');
      expect(run.out.text).not.toContain('Signed in');
      expect(await deviceNames()).not.toContain('victim laptop');
    });

    it('joins the account once the person at the terminal says yes', async () => {
      const { run, code } = await loginInTerminal('second desk');
      expect((await cli(['pair', 'approve', code], stranger)).code).toBe(0);
      await eventually(() => run.out.text.includes('(y/n)'), 'the question', 30_000);
      run.type('y\r');
      expect(await run.exited).toBe(0);
      expect(run.out.text).toContain('Signed in as stranger@example.org');
      expect(await deviceNames()).toContain('second desk');
    });

    it('approves at a terminal only after the waiting device name is typed back', async () => {
      const waiting = spawnCli(['login', '--auth', host.authUrl, '--device-name', 'tv'], tempDir());
      const code = await waiting.code();
      const approver = spawnInTerminal(['pair', 'approve', code], stranger);
      terminals.push(approver);
      await eventually(
        () => approver.out.text.includes('Type its name to confirm'),
        'the question',
        30_000,
      );
      expect(approver.out.text).toContain(`Waiting with ${code}: "tv"`);
      approver.type('my tv\r');
      expect(await approver.exited).toBe(1);
      expect(approver.out.text).toContain('Not approved');
      const pending = (await (await adminCall('GET', '/pairings')).json()) as {
        pairings: Array<{ code: string }>;
      };
      expect(pending.pairings.map((p) => p.code)).toContain(code);
      expect(await deviceNames()).not.toContain('tv');
    });
  },
);

describe('a scripted login approved on a device (no terminal to ask)', { timeout: 90_000 }, () => {
  /** A scripted `login` with `extra` flags, approved by the stranger's device; how it ended. */
  async function approvedScript(deviceName: string, extra: string[]) {
    const args = ['login', '--auth', host.authUrl, '--device-name', deviceName, ...extra];
    const login = spawnCli(args, tempDir());
    const code = await login.code();
    expect((await cli(['pair', 'approve', code, '--device-name', deviceName], stranger)).code).toBe(
      0,
    );
    return { exit: await login.exited, stderr: login.out.stderr, stdout: login.out.stdout };
  }

  it('declines without --account, and says the flag that would join it', async () => {
    const run = await approvedScript('script box', []);
    expect(run.exit).toBe(1);
    expect(run.stderr).toContain(
      'No terminal to ask whether to join it: to join it from a script, run login again with --account stranger@example.org.',
    );
    expect(run.stdout).toBe('');
    expect(await deviceNames()).not.toContain('script box');
  });

  it('declines when --account names another account', async () => {
    const run = await approvedScript('wrong box', ['--account', 'me@example.org']);
    expect(run.exit).toBe(1);
    expect(run.stderr).toContain('That is not the account me@example.org this login was for.');
    expect(await deviceNames()).not.toContain('wrong box');
  });

  it('joins the account --account names', async () => {
    const run = await approvedScript('right box', ['--account', 'Stranger@example.org']);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout).toContain('Signed in as stranger@example.org');
    expect(await deviceNames()).toContain('right box');
  });
});
