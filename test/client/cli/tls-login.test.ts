import { readFileSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import QRCode from 'qrcode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveQrText } from '../../../client/cli/login.ts';
import { pinnedFetch } from '../../../client/pinning.ts';
import { shortFingerprint } from '../../../protocol/fingerprint.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { hostDir, type RunningHost, startHostProgram } from '../../helpers/host-process.ts';
import { freePort } from '../../helpers/ports.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import {
  hasScript,
  spawnInTerminal,
  type TerminalRun,
  terminalQr,
} from '../../helpers/terminal.ts';
import { eventually } from '../../helpers/wait.ts';

const dirs: string[] = [];
const runs: TerminalRun[] = [];
const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-tls-login-');

let host: RunningHost;
let hostConfig: string;
let fingerprint: string;

beforeAll(async () => {
  // Fixed ports: the host comes back on the same addresses with another key.
  hostConfig = hostDir(
    { auth: await freePort(), ws: await freePort(), status: await freePort() },
    'self-signed',
  );
  dirs.push(hostConfig);
  host = await startHostProgram(hostConfig);
  fingerprint = host.fingerprint ?? '';
}, 60_000);

afterAll(async () => {
  killAll();
  for (const run of runs) if (run.child.exitCode === null) run.child.kill('SIGKILL');
  await host?.process.stop('SIGKILL').catch(() => null);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Approves a pairing code as the admin UI does (over HTTPS pinned to the host's certificate). */
async function approve(code: string, email = 'pin@example.org'): Promise<number> {
  const adminToken = readFileSync(join(hostConfig, 'data', 'admin-token'), 'utf8').trim();
  const res = await pinnedFetch(fingerprint)(`${host.authUrl}/admin/api/pairings/approve`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ code, email }),
  });
  return res.status;
}

/** Stored credentials of a config folder. */
function stored(dir: string): Record<string, { fingerprint?: string }> {
  return (
    JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8')) as {
      hosts: Record<string, { fingerprint?: string }>;
    }
  ).hosts;
}

// Each command is a fresh `bin/sync-host` process.
describe('login to a host with a self-signed certificate', { timeout: 90_000 }, () => {
  it('pairs with --fingerprint, shows the short form beside the code, and keeps the pin', async () => {
    expect(host.authUrl).toMatch(/^https:\/\//);
    const device = tempDir();
    const login = spawnCli(
      ['login', '--auth', host.authUrl, '--device-name', 'script', '--fingerprint', fingerprint],
      device,
    );
    const code = await login.code();
    expect(login.out.stderr).toContain(`Certificate:   ${shortFingerprint(fingerprint)}`);
    // The QR code (block characters into a pipe) carries the pin beside the code: #…&fp=.
    const qrText = `${host.authUrl}/admin/#pair=${code}&fp=${fingerprint}`;
    await eventually(() => login.out.stderr.includes('Waiting for approval'), 'the QR code');
    expect(login.out.stderr).toContain(await QRCode.toString(qrText, { type: 'utf8' }));
    expect(await approve(code)).toBe(200);
    expect(await login.exited).toBe(0);
    expect(stored(device)[host.authUrl]?.fingerprint).toBe(fingerprint);
    const devices = await cli(['devices'], device);
    expect(devices.code, devices.stderr).toBe(0);
    expect(devices.stdout).toContain('"script"');
  });

  it('accepts the fingerprint in hex with colons too', async () => {
    const hex = Buffer.from(fingerprint, 'base64url').toString('hex').match(/../g)?.join(':');
    const login = spawnCli(
      ['login', '--auth', host.authUrl, '--fingerprint', hex ?? ''],
      tempDir(),
    );
    expect(await approve(await login.code())).toBe(200);
    expect(await login.exited).toBe(0);
  });

  it('refuses a wrong --fingerprint with one line naming both, before any pairing', async () => {
    const wrong = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const device = tempDir();
    const run = await cli(['login', '--auth', host.authUrl, '--fingerprint', wrong], device);
    expect(run.code).not.toBe(0);
    expect(run.stderr).not.toContain('Pairing code');
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(wrong);
    expect(lines[0]).toContain(fingerprint);
    expect(() => readFileSync(join(device, 'credentials.json'))).toThrow();
  });

  it('refuses without a terminal and without --fingerprint, showing the fingerprint to pass', async () => {
    const run = await cli(['login', '--auth', host.authUrl], tempDir());
    expect(run.code).not.toBe(0);
    expect(run.stderr).not.toContain('Pairing code');
    expect(run.stderr).toContain(`--fingerprint ${fingerprint}`);
    expect(run.stderr).toContain(shortFingerprint(fingerprint));
  });

  it('refuses --fingerprint that is not a whole fingerprint, with exit 2', async () => {
    const run = await cli(
      ['login', '--auth', host.authUrl, '--fingerprint', shortFingerprint(fingerprint)],
      tempDir(),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--fingerprint must be the whole SHA-256 fingerprint');
  });

  it.skipIf(!hasScript)(
    'asks on a terminal as ssh does, and goes on only after "yes"',
    async () => {
      const declined = spawnInTerminal(['login', '--auth', host.authUrl], tempDir());
      runs.push(declined);
      const question = 'Trust this host and continue (yes/no)? ';
      await eventually(() => declined.out.text.includes(question), 'the question', 20_000);
      expect(declined.out.text).toContain(`Its certificate: ${shortFingerprint(fingerprint)}`);
      declined.type('no\n');
      expect(await declined.exited).not.toBe(0);
      expect(declined.out.text).toContain('was not trusted; nothing was sent to it');
      expect(declined.out.text).not.toContain('Pairing code');

      const device = tempDir();
      const accepted = spawnInTerminal(['login', '--auth', host.authUrl], device);
      runs.push(accepted);
      await eventually(() => accepted.out.text.includes(question), 'the question', 20_000);
      accepted.type('maybe\n');
      await eventually(() => accepted.out.text.includes('Please type "yes" or "no".'), 'again');
      accepted.type('yes\n');
      await eventually(() => accepted.out.text.includes('Name of this device'), 'the name', 20_000);
      accepted.type('tty\n');
      await eventually(
        () => /Pairing code: +[A-Z]{4}-[A-Z]{4}/.test(accepted.out.text),
        'the code',
      );
      expect(accepted.out.text).toContain(`Certificate:   ${shortFingerprint(fingerprint)}`);
      const code = /Pairing code: +([A-Z]{4}-[A-Z]{4})/.exec(accepted.out.text)?.[1] ?? '';
      // The QR code drawn on the terminal carries the fingerprint just trusted.
      await eventually(() => accepted.out.text.includes('Waiting for approval'), 'the QR code');
      expect(accepted.out.text).toContain(
        await terminalQr(`${host.authUrl}/admin/#pair=${code}&fp=${fingerprint}`),
      );
      expect(await approve(code)).toBe(200);
      expect(await accepted.exited).toBe(0);
      expect(stored(device)[host.authUrl]?.fingerprint).toBe(fingerprint);
    },
  );

  it("puts the fingerprint in the QR code's fragment only for the https:// origin it was checked on", () => {
    const pin = 'KC2clrNXhjoRtm6xigvp7drS8kFwUjPOx8cetJ4cWAk';
    const lan = 'https://192.168.1.5:8445';
    const approveUrl = `${lan}/admin/#pair=BCDF-GHJK`;
    expect(approveQrText(approveUrl, lan, pin)).toBe(`${approveUrl}&fp=${pin}`);
    expect(approveQrText(`${lan}/admin/`, `${lan}/`, pin)).toBe(`${lan}/admin/#fp=${pin}`);
    // no pin: a CA-signed certificate or http://
    expect(approveQrText(approveUrl, lan, undefined)).toBe(approveUrl);
    const plain = 'http://192.168.1.5:8445/admin/#pair=BCDF-GHJK';
    expect(approveQrText(plain, 'http://192.168.1.5:8445', pin)).toBe(plain);
    // the host names a proxy's address (another certificate) or another port
    const proxied = 'https://sync.example.org/admin/#pair=BCDF-GHJK';
    expect(approveQrText(proxied, lan, pin)).toBe(proxied);
    expect(approveQrText('https://192.168.1.5:9445/admin/', lan, pin)).not.toContain('fp=');
    expect(approveQrText('not a url', lan, pin)).toBe('not a url');
  });

  it('refuses a host that comes back with another certificate, naming both fingerprints', async () => {
    const device = tempDir();
    const login = spawnCli(['login', '--auth', host.authUrl, '--fingerprint', fingerprint], device);
    expect(await approve(await login.code())).toBe(200);
    expect(await login.exited).toBe(0);
    // Reinstalled: a new key, the same addresses.
    expect(await host.process.stop('SIGTERM')).toBe(0);
    unlinkSync(join(hostConfig, 'data', 'tls-key.pem'));
    host = await startHostProgram(hostConfig);
    const changed = host.fingerprint ?? '';
    expect(changed).not.toBe(fingerprint);
    for (const args of [['devices'], ['project', 'add', 'notes', 'Notes']]) {
      const run = await cli(args, device);
      expect(run.code).not.toBe(0);
      const lines = run.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(
        `shows certificate ${shortFingerprint(changed)} (sha256 ${changed})`,
      );
      expect(lines[0]).toContain(
        `not the pinned ${shortFingerprint(fingerprint)} (sha256 ${fingerprint})`,
      );
    }
    // A login again without the new fingerprint meets the old pin and is refused too.
    const again = await cli(['login', '--auth', host.authUrl], device);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(changed);
    fingerprint = changed;
  });
});
