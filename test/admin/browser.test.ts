import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chromiumFlags,
  chromiumPath,
  hasBrowser,
  requireBrowser,
  screenshotsDir as screenshots,
} from '../helpers/chromium.ts';
import { joinRelay, registerProject, startTestHost, type TestHost } from '../helpers/host.ts';

if (!hasBrowser && requireBrowser) {
  describe('admin UI in Chromium', () => {
    it(`needs ${chromiumPath} (REQUIRE_BROWSER=1): apt-get install -y chromium`, () => {
      expect.fail(`${chromiumPath} is missing and REQUIRE_BROWSER=1 is set`);
    });
  });
}

const title = hasBrowser
  ? 'admin UI in Chromium'
  : `admin UI in Chromium (skipped: ${chromiumPath} not found; apt-get install -y chromium, or REQUIRE_BROWSER=1 to fail)`;

describe.skipIf(!hasBrowser)(title, () => {
  let th: TestHost;
  let profile: string;
  let context: BrowserContext;
  let page: Page;
  const requestedUrls: string[] = [];
  let jwt = '';
  let device: { deviceToken: string; id: number } | undefined;

  beforeAll(async () => {
    // The owner is someone else, so alice starts on DEFAULT_TIER.
    th = await startTestHost({ auth: ['DEFAULT_TIER=free', 'OWNER_EMAIL=owner@example.com'] });
    profile = mkdtempSync(join(tmpdir(), 'sync-host-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      headless: true,
      args: chromiumFlags,
      viewport: { width: 1200, height: 860 },
      colorScheme: 'light',
    });
    context.on('request', (req) => requestedUrls.push(req.url()));
    page = context.pages()[0] ?? (await context.newPage());
    mkdirSync(screenshots, { recursive: true });
  });

  afterAll(async () => {
    await context?.close();
    await th?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('opens signed in from the admin URL and takes the token out of the address bar', async () => {
    await page.goto(th.host.urls.admin ?? '');
    await expect.poll(() => page.locator('#live').textContent()).toMatch(/^Live/);
    expect(page.url()).toBe(`${th.base}/admin/`);
    expect(await page.locator('#token-form').isVisible()).toBe(false);
    expect(await page.evaluate(() => sessionStorage.getItem('sync-host.adminToken'))).toBe(
      th.host.adminToken,
    );
    await expect
      .poll(() => page.locator('#pending .empty').textContent())
      .toMatch(/No pending sign-ins/);
    expect(await page.locator('#users .empty').textContent()).toMatch(/No users yet/);
  });

  it('shows a new magic link without reload and signs the user in through its Open button', async () => {
    await fetch(`${th.base}/auth/magic-link`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'alice@example.com' }),
    });
    const row = page.locator('#pending tr[data-email="alice@example.com"]');
    await row.waitFor({ timeout: 8_000 });
    await page.locator('#pending').screenshot({ path: join(screenshots, 'pending-sign-ins.png') });

    const [popup] = await Promise.all([
      context.waitForEvent('page'),
      row.getByRole('link', { name: 'Open' }).click(),
    ]);
    await popup.waitForLoadState();
    // Opening the link only asks; the click uses it.
    expect(await popup.locator('h1').textContent()).toBe('Sign in to sync-host');
    await popup.getByRole('button', { name: 'Sign in' }).click();
    await popup.locator('#value').waitFor();
    expect(await popup.locator('h1').textContent()).toBe('Signed in');
    // The page shows the command that finishes in the CLI: `sync-host login --auth … --token <JWT>`.
    jwt = (await popup.locator('#value').inputValue()).trim().split(' --token ')[1] ?? '';
    expect(jwt.split('.')).toHaveLength(3);
    await popup.close();

    await page.locator('#users tr[data-user="alice@example.com"]').waitFor({ timeout: 8_000 });
    await page.locator('#pending .empty').waitFor({ timeout: 8_000 });
  });

  it('changes a tier from the users table with the keyboard', async () => {
    const row = page.locator('#users tr[data-user="alice@example.com"]');
    await row.getByRole('combobox', { name: 'Tier of alice@example.com' }).selectOption('pro');
    const save = row.getByRole('button', { name: 'Save' });
    expect(await save.isEnabled()).toBe(true);
    await save.focus();
    await page.keyboard.press('Enter');
    await expect
      .poll(() => page.locator('#users-status').textContent())
      .toBe('Saved: alice@example.com is now pro.');
    const users = (await th.admin('GET', '/users')).body as {
      users: Array<{ email: string; tier: string }>;
    };
    expect(users.users[0]).toMatchObject({ email: 'alice@example.com', tier: 'pro' });

    // The new tier is in force: a device registered with the login JWT may create a project.
    const res = await fetch(`${th.base}/auth/devices`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ deviceName: 'Alice laptop', platform: 'linux' }),
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { deviceToken: string; device: { id: number } };
    device = { deviceToken: body.deviceToken, id: body.device.id };
    await page.locator('#users').screenshot({ path: join(screenshots, 'users.png') });
  });

  it('revokes a device after confirmation and its relay socket closes with 4003', async () => {
    if (!device) throw new Error('the previous test registers the device');
    const project = await registerProject(th.base, device.deviceToken, 'thesis');
    const relay = await joinRelay(th.relayUrl, project.roomId, device.id, device.deviceToken);

    const row = page.locator(`#devices tr[data-device="${device.id}"]`);
    await expect.poll(() => row.locator('.badge.on').count(), { timeout: 8_000 }).toBe(1);
    await expect
      .poll(() => page.locator('#relay [data-stat="connections"]').textContent())
      .toBe('1');
    // The room by its project and user, not by its opaque id alone.
    const room = page.locator(`#relay tr[data-room="${project.roomId}"]`);
    const roomText = (await room.textContent()) ?? '';
    expect(roomText).toContain('Project thesis');
    expect(roomText).toContain('alice@example.com');
    expect(roomText).toContain(`Alice laptop #${device.id}`);
    expect(await room.locator('.room-id').getAttribute('title')).toBe(`Room ${project.roomId}`);
    // A document kept by the host shows under its project and user, with its size.
    const data = Buffer.alloc(3000, 1).toString('base64');
    relay.socket.send(JSON.stringify({ type: 'append', doc: 'notes.md', ref: 1, data }));
    const stored = page.locator(`#storage tr[data-room="${project.roomId}"]`);
    await stored.waitFor({ timeout: 8_000 });
    const storedText = (await stored.textContent()) ?? '';
    expect(storedText).toContain('Project thesis');
    expect(storedText).toContain('alice@example.com');
    expect(await stored.locator('[data-bytes]').getAttribute('data-bytes')).toBe(
      String(3000 + 64 + String(device.id).length),
    );
    expect(storedText).toContain('3.0 KiB of 1.0 GiB');
    // The project's files: count and bytes as its device reported them, the chunks on the host,
    // names only of a folder that is not encrypted.
    const chunk = Buffer.alloc(2000, 2);
    const chunkId = `s${createHash('sha256').update(chunk).digest('base64url')}`;
    const put = { type: 'chunk-put', ref: 2, id: chunkId, data: chunk.toString('base64') };
    relay.socket.send(JSON.stringify(put));
    const report = { type: 'folder-report', files: 2, bytes: 2500 };
    const names = ['notes/a.md', 'photos/cat.jpg'];
    relay.socket.send(JSON.stringify({ ...report, doc: 'folder', encrypted: false, names }));
    const secret = { doc: 'hsecret', encrypted: true, names: ['secret-plan.md'] };
    relay.socket.send(JSON.stringify({ ...report, ...secret }));
    const files = stored.locator('[data-files]');
    await expect.poll(() => files.getAttribute('data-files'), { timeout: 8_000 }).toBe('4');
    await expect
      .poll(() => stored.locator('[data-chunk-bytes]').getAttribute('data-chunk-bytes'))
      .toBe(String(2000 + 64 + 44));
    const filesText = (await files.textContent()) ?? '';
    expect(filesText).toContain('4 files, 4.9 KiB');
    expect(filesText).toContain('in 1 chunk on the host');
    expect(filesText).toContain('names not known to the host (encrypted)');
    // The names are asked of the host when the list is opened.
    await stored.locator('details.file-names summary').click();
    await expect
      .poll(() => stored.locator('details.file-names li').allTextContents())
      .toEqual(names);
    expect(await page.locator('#storage').textContent()).not.toContain('secret-plan');
    await page.locator('#projects tr[data-project]').first().waitFor();
    // At 1200 px every table fits its section: no button beyond a sideways scroll.
    const overflowing = await page
      .locator('.table-scroll')
      .evaluateAll((tables) =>
        tables
          .filter((t) => t.scrollWidth > t.clientWidth + 1)
          .map((t) => t.closest('section')?.id),
      );
    expect(overflowing).toEqual([]);
    await page.locator('#devices').screenshot({ path: join(screenshots, 'devices.png') });
    await page.locator('#projects').screenshot({ path: join(screenshots, 'projects.png') });
    await page.locator('#relay').screenshot({ path: join(screenshots, 'relay.png') });
    await page.locator('#storage').screenshot({ path: join(screenshots, 'storage.png') });
    await page.locator('#connection').screenshot({ path: join(screenshots, 'connection.png') });
    // From the top, so the sticky section links are where a reader expects them.
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(screenshots, 'dashboard.png'), fullPage: true });

    // Escape cancels: nothing is revoked.
    await row.getByRole('button', { name: 'Revoke' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('Alice laptop');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(relay.socket.readyState).toBe(relay.socket.OPEN);

    await row.getByRole('button', { name: 'Revoke' }).click();
    await dialog.waitFor();
    await page.screenshot({ path: join(screenshots, 'revoke-confirmation.png') });
    await dialog.getByRole('button', { name: 'Revoke device' }).click();
    expect(await relay.closed).toBe(4003);
    await expect.poll(() => row.count()).toBe(0);
    await expect
      .poll(() => page.locator('#relay [data-stat="connections"]').textContent(), {
        timeout: 8_000,
      })
      .toBe('0');
  });

  it('copies the connection details', async () => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: th.base });
    await page.locator('#connection').getByRole('button', { name: 'Copy' }).first().click();
    await expect
      .poll(() => page.locator('#connection [role="status"]').first().textContent())
      .toBe('Copied');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(th.base);
  });

  it('never sent the admin token in a URL', () => {
    expect(requestedUrls.length).toBeGreaterThan(5);
    for (const url of requestedUrls) expect(url).not.toContain(th.host.adminToken);
  });

  it('asks for the token when the stored one is wrong', async () => {
    await page.evaluate(() => sessionStorage.setItem('sync-host.adminToken', 'wrong'));
    await page.goto(`${th.base}/admin/`);
    await page.locator('#token-form').waitFor();
    expect(await page.locator('#token-reason').textContent()).toMatch(/not accepted/);
    await page.getByLabel('Admin token').fill(th.host.adminToken);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#live').textContent()).toMatch(/^Live/);
  });
});
