import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pair } from '../../../client/pairing.ts';
import { chromiumFlags, chromiumPath, hasBrowser } from '../../helpers/chromium.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { startTestHost } from '../../helpers/host.ts';
import { hostDir, type RunningHost, startHostProgram } from '../../helpers/host-process.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';

const dirs: string[] = [];
const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-pair-');

let host: RunningHost;
let hostConfig: string;
let adminToken: string;
const phone = tempDir();

beforeAll(async () => {
  hostConfig = hostDir();
  dirs.push(hostConfig);
  host = await startHostProgram(hostConfig);
  adminToken = readFileSync(join(hostConfig, 'data', 'admin-token'), 'utf8').trim();
});

afterAll(async () => {
  killAll();
  await host?.process.stop('SIGKILL').catch(() => null);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const admin = (path: string, body: unknown) =>
  fetch(`${host.authUrl}/admin/api${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

// Each command is a fresh `bin/sync-host` process (seconds of start-up on a busy machine).
describe('sync-host login by pairing', { timeout: 90_000 }, () => {
  it('pairs without an e-mail: shows code, URL and QR code, and signs in once the admin approves', async () => {
    const login = spawnCli(['login', '--auth', host.authUrl, '--device-name', 'phone'], phone);
    const code = await login.code();
    expect(login.out.stderr).toContain(`${host.authUrl}/admin/#pair=${code}`);
    expect(login.out.stderr).toContain(`sync-host pair approve ${code}`);
    expect(login.out.stderr).toMatch(/[▀▄█]{10}/);
    const approved = await admin('/pairings/approve', {
      code: code.toLowerCase(),
      email: 'owner@example.org',
    });
    expect(approved.status).toBe(200);
    expect(await login.exited).toBe(0);
    expect(login.out.stdout).toMatch(
      /^Signed in as owner@example\.org on http:\/\/127\.0\.0\.1:\d+: device \d+ "phone"/,
    );
    expect(login.out.stderr).toContain('Approved by the host administrator.');
    expect((await cli(['devices'], phone)).code).toBe(0);
  });

  it('pairs a second machine approved on a signed-in device with pair approve, and denies a third', async () => {
    const laptop = tempDir();
    const login = spawnCli(
      [
        'login',
        '--auth',
        host.authUrl,
        '--device-name',
        'laptop',
        '--account',
        'owner@example.org',
      ],
      laptop,
    );
    const code = await login.code();
    const approve = await cli(['pair', 'approve', code.replace('-', '')], phone);
    expect(approve.code).toBe(0);
    expect(approve.stderr).toMatch(/Approved: device \d+ "laptop"/);
    expect(await login.exited).toBe(0);
    expect(login.out.stderr).toContain('Approved on your device "phone".');
    expect(login.out.stdout).toContain('Signed in as owner@example.org');

    const rogue = spawnCli(['login', '--auth', host.authUrl, '--device-name', 'rogue'], tempDir());
    const rogueCode = await rogue.code();
    const deny = await cli(['pair', 'deny', rogueCode], laptop);
    expect(deny.code).toBe(0);
    expect(await rogue.exited).toBe(1);
    expect(rogue.out.stderr).toContain('pair_denied');
    expect(rogue.out.stdout).toBe('');
  });

  it.skipIf(!hasBrowser)(
    'pairs with an e-mail on a host without SMTP, approved by the link opened in Chromium and confirmed',
    async () => {
      const email = 'kim@example.org';
      const tablet = tempDir();
      const login = spawnCli(
        ['login', email, '--auth', host.authUrl, '--device-name', 'tablet'],
        tablet,
      );
      const code = await login.code();
      expect(login.out.stderr).toContain('no SMTP');
      expect(login.out.stderr).not.toContain('A login link was sent');
      const token = await host.magicToken(email);
      const profile = tempDir();
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath,
        headless: true,
        args: chromiumFlags,
      });
      try {
        const page = await context.newPage();
        await page.goto(`${host.authUrl}/auth/verify?token=${token}`);
        expect(await page.locator('h1').textContent()).toBe('Approve a new device');
        expect(await page.locator('body').textContent()).toContain(code);
        await page.getByRole('button', { name: 'Approve this device' }).click();
        await page.locator('h1', { hasText: 'Device approved' }).waitFor();
        expect(await page.locator('body').textContent()).toMatch(/approved/i);
      } finally {
        await context.close();
      }
      expect(await login.exited).toBe(0);
      expect(login.out.stdout).toContain(`Signed in as ${email}`);
      expect(login.out.stderr).toContain(`Approved through the sign-in link sent to ${email}.`);
    },
  );

  it('hands the token out once: a second poll of a collected pairing is 404', async () => {
    let pairingId = '';
    const paired = pair({
      authUrl: host.authUrl,
      device: { deviceName: 'lib', platform: 'test' },
      onCode: (started) => {
        pairingId = started.pairingId;
        void admin('/pairings/approve', { code: started.code, email: 'owner@example.org' });
      },
    });
    const result = await paired;
    expect(result.user.email).toBe('owner@example.org');
    const again = await fetch(`${host.authUrl}/auth/pair/${pairingId}`);
    expect(again.status).toBe(404);
  });

  it('refuses guessing: wrong codes then even the right one, and unknown pairingIds', async () => {
    const login = spawnCli(['login', '--auth', host.authUrl], tempDir());
    const code = await login.code();
    const credentials = JSON.parse(readFileSync(join(phone, 'credentials.json'), 'utf8')) as {
      hosts: Record<string, { deviceToken: string }>;
    };
    const token = credentials.hosts[host.authUrl]!.deviceToken;
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${host.authUrl}/auth/pair/approve`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ code: `BBBB-BBB${'BCDFGHJKLM'[i]}` }),
      });
      expect(res.status).toBe(404);
    }
    const blocked = await cli(['pair', 'approve', code], phone);
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toContain('rate_limited');
    login.child.kill('SIGINT');

    // 30 unknown pairingIds per address (the 404 of a collected pairing counted one already).
    const statuses: number[] = [];
    for (let i = 0; i < 31 && !statuses.includes(429); i++) {
      const id = i.toString(16).padStart(64, 'a');
      statuses.push((await fetch(`${host.authUrl}/auth/pair/${id}`)).status);
    }
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.length).toBeGreaterThanOrEqual(29);
    expect(statuses.slice(0, -1).every((s) => s === 404)).toBe(true);
  });
});

describe('everyday commands', { timeout: 90_000 }, () => {
  it('removes a project, a device and signs out', async () => {
    expect((await cli(['project', 'add', 'notes', 'Notes'], phone)).code).toBe(0);
    const removed = await cli(['project', 'remove', 'notes'], phone);
    expect(removed.code).toBe(0);
    expect(JSON.parse((await cli(['projects'], phone)).stdout)).toEqual([]);

    const devices = JSON.parse((await cli(['devices'], phone)).stdout) as Array<{
      id: number;
      deviceName: string;
    }>;
    const laptop = devices.find((d) => d.deviceName === 'laptop')!;
    expect((await cli(['devices', 'remove', String(laptop.id)], phone)).code).toBe(0);
    const left = JSON.parse((await cli(['devices'], phone)).stdout) as Array<{ id: number }>;
    expect(left.map((d) => d.id)).not.toContain(laptop.id);

    const file = join(phone, 'credentials.json');
    const token = (
      JSON.parse(readFileSync(file, 'utf8')) as { hosts: Record<string, { deviceToken: string }> }
    ).hosts[host.authUrl]!.deviceToken;
    const out = await cli(['logout'], phone);
    expect(out.code).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8')).hosts).toEqual({});
    const me = await fetch(`${host.authUrl}/auth/device`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(me.status).toBe(401);
  });
});

describe('pairing expiry', { timeout: 90_000 }, () => {
  it('tells the waiting login that its code expired (the host clock moved 10 minutes)', async () => {
    let offsetMs = 0;
    const th = await startTestHost({ ui: false, now: () => Date.now() + offsetMs });
    try {
      const login = spawnCli(['login', '--auth', th.base, '--device-name', 'late'], tempDir());
      const code = await login.code();
      offsetMs = 10 * 60_000;
      expect(await login.exited).toBe(1);
      expect(login.out.stderr).toContain('token_expired');
      expect(login.out.stdout).toBe('');
      const approve = await th.admin('POST', '/pairings/approve', { code, email: 'x@example.org' });
      expect(approve.status).toBe(404);
    } finally {
      await th.close();
    }
  });
});
