import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestHost, type TestHost } from '../../helpers/host.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import {
  hasScript,
  spawnInTerminal,
  type TerminalRun,
  terminalQr,
} from '../../helpers/terminal.ts';
import { eventually } from '../../helpers/wait.ts';

const runs: TerminalRun[] = [];
let host: TestHost;

const tempDir = tempDirMaker('sync-tty-');

beforeAll(async () => {
  host = await startTestHost();
});

afterAll(async () => {
  for (const run of runs) if (run.child.exitCode === null) run.child.kill('SIGKILL');
  await host?.close();
});

const defaultName = `${hostname()} (${process.platform})`;

/** Logs in at a terminal, answers the name question with `answer`, approves the code. */
async function loginAtTerminal(answer: string, email: string) {
  const run = spawnInTerminal(['login', '--auth', host.base], tempDir());
  runs.push(run);
  const prompt = `Name of this device [${defaultName}]: `;
  await eventually(() => run.out.text.includes(prompt), 'the device name question', 20_000);
  expect(run.out.text).not.toContain('Pairing code');
  run.type(`${answer}\n`);
  await eventually(() => /Pairing code: +[A-Z]{4}-[A-Z]{4}/.test(run.out.text), 'the code', 20_000);
  const code = /Pairing code: +([A-Z]{4}-[A-Z]{4})/.exec(run.out.text)?.[1];
  const approved = await host.admin('POST', '/pairings/approve', { code, email });
  expect(approved.status).toBe(200);
  expect(await run.exited).toBe(0);
  return run.out.text;
}

// Each login is a fresh `bin/sync-host` process behind a pty.
describe.skipIf(!hasScript)('sync-host login in a terminal', { timeout: 60_000 }, () => {
  it('asks for the device name with host and platform as the default, and draws the QR code in colour', async () => {
    const shown = await loginAtTerminal('pty box', 'tty@example.org');
    const esc = '\u001b';
    expect(shown).toContain(`${esc}[47m${esc}[30m ▄▄▄▄▄▄▄`); // the QR code's first line
    expect(shown).toContain(`▄▄▄▄▄▄▄ ${esc}[0m`);
    // A plain http:// host: the QR code holds the approve URL alone, no certificate to pin.
    const code = /Pairing code: +([A-Z]{4}-[A-Z]{4})/.exec(shown)?.[1];
    expect(shown).toContain(await terminalQr(`${host.base}/admin/#pair=${code}`));
    expect(shown).toMatch(/Signed in as tty@example\.org on .*: device \d+ "pty box"/);
  });

  it('does not ask for a name when --token names a device that has one', async () => {
    const { deviceToken } = await host.signIn('tty@example.org', 'named before');
    const run = spawnInTerminal(['login', '--auth', host.base, '--token', deviceToken], tempDir());
    runs.push(run);
    expect(await run.exited).toBe(0);
    expect(run.out.text).not.toContain('Name of this device');
    expect(run.out.text).toMatch(/Signed in as tty@example\.org on .*: device \d+ "named before"/);
  });

  it('keeps the default name when Enter is pressed', async () => {
    const shown = await loginAtTerminal('', 'tty@example.org');
    const name = defaultName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect(shown).toMatch(
      new RegExp(`Signed in as tty@example\\.org on .*: device \\d+ "${name}"`),
    );
  });
});

describe.skipIf(!hasScript)('devices and projects in a terminal', { timeout: 60_000 }, () => {
  it('print a table on a terminal, and JSON there with --json', async () => {
    const config = tempDir();
    const { deviceToken, deviceId, userId } = await host.signIn('tables@example.org', 'desk "one"');
    await host.signIn('tables@example.org', 'laptop');
    const tier = { tier: 'pro', expiresAt: null };
    expect((await host.admin('PUT', `/users/${userId}/subscription`, tier)).status).toBe(200);
    for (const args of [
      ['login', '--auth', host.base, '--token', deviceToken],
      ['project', 'add', 'notes', 'My notes'],
    ]) {
      const run = spawnInTerminal(args, config);
      runs.push(run);
      expect(await run.exited, run.out.text).toBe(0);
    }
    const shown = async (args: string[]) => {
      const run = spawnInTerminal(args, config);
      runs.push(run);
      expect(await run.exited).toBe(0);
      return run.out.text.split('\r\n').filter((line) => line !== '');
    };
    const devices = await shown(['devices']);
    expect(devices[0]).toMatch(/^ID +NAME +PLATFORM +LAST SEEN$/);
    expect(devices.find((line) => line.startsWith(`${deviceId} `))).toMatch(
      /^\d+ +desk "one" +linux +\S+ +this device$/,
    );
    expect(devices.some((line) => / laptop /.test(line) && !line.endsWith('this device'))).toBe(
      true,
    );
    const projects = await shown(['projects']);
    expect(projects[0]).toMatch(/^KEY +NAME +CREATED$/);
    expect(projects[1]).toMatch(/^notes +My notes +\d{4}-/);
    const json = JSON.parse((await shown(['projects', '--json'])).join('\n')) as {
      projectKey: string;
    }[];
    expect(json.map((project) => project.projectKey)).toEqual(['notes']);
  });
});
