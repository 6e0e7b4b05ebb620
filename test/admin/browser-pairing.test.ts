import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import QRCode from 'qrcode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qrOptions } from '../../renderer/qr.ts';
import { chromiumPath, hasBrowser, requireBrowser, screenshotsDir } from '../helpers/chromium.ts';
import { joinRelay, registerProject, type TestHost } from '../helpers/host.ts';
import {
  type AdminPage,
  inView,
  openAdminPage,
  pollPairing,
  startPairing as startPairingAt,
  waitForCard,
} from './admin-page.ts';

if (!hasBrowser && requireBrowser) {
  describe('admin UI pairing in Chromium', () => {
    it(`needs ${chromiumPath} (REQUIRE_BROWSER=1)`, () => {
      expect.fail(`${chromiumPath} is missing and REQUIRE_BROWSER=1 is set`);
    });
  });
}

const json = { 'Content-Type': 'application/json' };

describe.skipIf(!hasBrowser)('admin UI pairing in Chromium', () => {
  let admin: AdminPage;
  let th: TestHost;
  let browser: Browser;
  let page: Page;
  let ownerToken = '';
  let ownerDeviceId = 0;

  const startPairing = (deviceName: string, platform: string) =>
    startPairingAt(th.base, deviceName, platform);
  const poll = (pairingId: string) => pollPairing(th.base, pairingId);
  const card = (code: string) => page.locator(`#pairings .pair-card[data-code="${code}"]`);
  const pairingsStatus = () => page.locator('#pairings-status').textContent();
  const waitingCard = (deviceName: string, platform: string) =>
    waitForCard(page, th.base, deviceName, platform);

  beforeAll(async () => {
    // The first user (approved below with a typed e-mail) is the owner.
    admin = await openAdminPage();
    ({ th, browser, page } = admin);
  });

  afterAll(async () => {
    await admin?.close();
  });

  it('shows a new pairing as it arrives: code, device, platform, address and age', async () => {
    await expect
      .poll(() => page.locator('#pairings .empty').textContent())
      .toMatch(/No device is waiting/);
    const started = await startPairing('Pixel 8', 'android');
    const c = card(started.code);
    await c.waitFor({ timeout: 8_000 });
    expect(started.code).toMatch(/^[B-Z]{4}-[B-Z]{4}$/);
    expect(await c.locator('.pair-code').textContent()).toBe(started.code);
    const size = await c
      .locator('.pair-code')
      .evaluate((el) => Number.parseFloat(getComputedStyle(el).fontSize));
    expect(size).toBeGreaterThanOrEqual(28);
    const text = (await c.textContent()) ?? '';
    expect(text).toContain('Pixel 8');
    expect(text).toContain('android');
    expect(text).toContain('127.0.0.1');
    expect(await c.locator('time').first().textContent()).toMatch(/just now|\d+ s ago/);
    expect(await page.locator('[data-count="pairings"]').textContent()).toBe('1');
  });

  it('approves with a typed e-mail: the device collects its token and the user is the owner', async () => {
    const [pending] = (
      (await th.admin('GET', '/pairings')).body as { pairings: Array<{ code: string }> }
    ).pairings;
    const started = await startPairing('Work laptop', 'linux');
    const first = pending?.code ?? '';
    const c = card(first);
    // No user yet: the only choice is a new user, so the e-mail field is shown.
    expect(await c.locator('select option').allTextContents()).toEqual([
      'A new user (the first is the owner)',
    ]);
    await c.getByRole('textbox').fill('owner@example.com');
    await c.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(pairingsStatus).toMatch(/^Approved [B-Z]{4}-[B-Z]{4}: “Pixel 8”/);
    await c.waitFor({ state: 'detached' });
    await card(started.code).waitFor();
    const pairings = (await th.admin('GET', '/pairings')).body as { pairings: unknown[] };
    expect(pairings.pairings).toHaveLength(1);
    await page.screenshot({ path: join(screenshotsDir, 'pairing-1200.png') });
    await expect.poll(() => page.locator('#users tr[data-user]').count()).toBe(1);

    // The second pairing is approved for the owner, who is now the preselected choice.
    const second = card(started.code);
    expect(await second.locator('select').inputValue()).toBe('owner@example.com');
    await second.getByRole('button', { name: 'Approve' }).click();
    await second.waitFor({ state: 'detached' });
    const answer = await poll(started.pairingId);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      status: 'approved',
      device: { deviceName: 'Work laptop', platform: 'linux' },
      user: { email: 'owner@example.com' },
    });
    ownerToken = String(answer.body.deviceToken);
    ownerDeviceId = Number((answer.body.device as { id: number }).id);
    expect(ownerToken.length).toBeGreaterThan(20);
  });

  it('marks the owner and shows the project limit of the chosen tier beside the selector', async () => {
    const owner = page.locator('#users tr[data-user="owner@example.com"]');
    expect(await owner.locator('.badge.owner').textContent()).toBe('owner');
    expect(await owner.locator('.tier-limit').textContent()).toBe('unlimited projects');

    await page.locator('#invite-email').fill('Bob@Example.com');
    await page.getByRole('button', { name: 'Invite' }).click();
    await expect
      .poll(() => page.locator('#users-status').textContent())
      .toMatch(/^Invited bob@example.com: the account exists now/);
    const bob = page.locator('#users tr[data-user="bob@example.com"]');
    await bob.waitFor();
    expect(await bob.locator('.badge.owner').count()).toBe(0);
    const tier = bob.getByRole('combobox', { name: 'Tier of bob@example.com' });
    const limits: Record<string, string> = {};
    for (const t of ['free', 'personal', 'pro', 'team', 'free']) {
      await tier.selectOption(t);
      limits[t] = (await bob.locator('.tier-limit').textContent()) ?? '';
    }
    expect(limits).toEqual({
      free: 'no synced projects',
      personal: 'up to 1 project',
      pro: 'unlimited projects',
      team: 'unlimited projects',
    });
  });

  it('approves with an existing user picked from the list', async () => {
    const { started, c } = await waitingCard('Bob tablet', 'ios');
    await c.locator('select').selectOption('bob@example.com');
    expect(await c.getByRole('textbox').isVisible()).toBe(false);
    await c.getByRole('button', { name: 'Approve' }).click();
    await expect
      .poll(pairingsStatus)
      .toBe(
        `Approved ${started.code}: “Bob tablet” is now a device of bob@example.com; it signs in by itself within a few seconds.`,
      );
    const answer = await poll(started.pairingId);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ user: { email: 'bob@example.com' } });
  });

  it('shows why an approval failed', async () => {
    const { started, c } = await waitingCard('Late laptop', 'linux');
    // Denied elsewhere (another admin, the tray) while this page still shows it.
    expect((await th.admin('POST', '/pairings/deny', { code: started.code })).status).toBe(204);
    await c.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(pairingsStatus).toMatch(new RegExp(`^Could not approve ${started.code}: .+`));
    expect(await page.locator('#pairings-status').getAttribute('class')).toContain('error-text');
  });

  it('shows a QR code of the auth URL, drawn in the page under its CSP', async () => {
    const img = page.locator('#connection img.qr');
    await expect
      .poll(() => img.evaluate((el: HTMLImageElement) => el.naturalWidth))
      .toBeGreaterThan(0);
    const expected = await QRCode.toString(th.base, qrOptions);
    expect(await img.getAttribute('src')).toBe(
      `data:image/svg+xml;charset=utf-8,${encodeURIComponent(expected)}`,
    );
    expect(await img.getAttribute('alt')).toBe(`QR code of the auth URL ${th.base}`);
    expect(admin.cspViolations).toEqual([]);
  });

  describe('at 390 px wide', () => {
    let phone: Page;
    let project: { id: number; roomId: string };
    let relay: Awaited<ReturnType<typeof joinRelay>>;
    const long = 'carol.with.a.long.address@example.com';

    beforeAll(async () => {
      // Something in every table: a device in a room of a project, a pending sign-in, a user with
      // a long address, a waiting pairing.
      project = await registerProject(th.base, ownerToken, 'notes');
      relay = await joinRelay(th.relayUrl, project.roomId, ownerDeviceId, ownerToken);
      await fetch(`${th.base}/auth/magic-link`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ email: long }),
      });
      await th.admin('POST', '/users', { email: long });
      const waiting = await startPairing('Phone of Carol', 'android');
      const context = await browser.newContext({
        viewport: { width: 390, height: 844 },
        deviceScaleFactor: 2,
        colorScheme: 'light',
      });
      phone = await context.newPage();
      await phone.goto(th.host.urls.admin ?? '');
      await phone.goto(waiting.approveUrl);
      await phone.locator(`.pair-card[data-code="${waiting.code}"].highlight`).waitFor();
      await phone.locator('#projects tr[data-project]').waitFor();
      await phone.locator('#pending tr[data-email]').waitFor();
      await phone.locator(`#relay tr[data-room="${project.roomId}"]`).waitFor();
      await phone.locator(`#users tr[data-user="${long}"]`).waitFor();
    });

    afterAll(() => {
      relay?.socket.close();
    });

    it('never scrolls the page sideways: every table row is a card', async () => {
      expect(
        await phone.evaluate(() => document.scrollingElement?.scrollWidth),
      ).toBeLessThanOrEqual(391);
      const rows = phone.locator('.table-scroll tbody tr');
      expect(await rows.count()).toBeGreaterThanOrEqual(6);
      for (const display of await rows.evaluateAll((trs) =>
        trs.map((tr) => getComputedStyle(tr).display),
      ))
        expect(display).toBe('block');
      // Nothing inside a card is wider than its card either (nothing clipped at its edge).
      const overflowing = await phone
        .locator('.table-scroll')
        .evaluateAll((tables) =>
          tables
            .filter((t) => t.scrollWidth > t.clientWidth + 1)
            .map((t) => t.closest('section')?.id),
        );
      expect(overflowing).toEqual([]);
      await phone.screenshot({ path: join(screenshotsDir, 'pairing-390.png') });
      await phone.evaluate(() => window.scrollTo(0, 0));
      await phone.screenshot({ path: join(screenshotsDir, 'narrow-full.png'), fullPage: true });
    });

    it('shows every Approve, Deny, Revoke, Remove, Delete and Save button whole on screen, and a tap reaches it', async () => {
      const names = /^(Approve|Deny|Revoke|Remove|Delete|Save|Copy link|Open)$/;
      const seen: Record<string, number> = {};
      for (const id of ['pairings', 'pending', 'users', 'devices', 'projects', 'relay']) {
        const buttons = phone.locator(`#${id}`).getByRole('button', { name: names });
        const links = phone.locator(`#${id}`).getByRole('link', { name: names });
        for (const button of [...(await buttons.all()), ...(await links.all())]) {
          // Scrolled to vertically only: a button beyond a sideways scroll does not count.
          await button.evaluate((el) => {
            for (const t of document.querySelectorAll('.table-scroll')) t.scrollLeft = 0;
            const r = el.getBoundingClientRect();
            window.scrollTo(0, scrollY + r.top - innerHeight / 2);
          });
          const box = await button.boundingBox();
          const name = `${id} ${await button.textContent()}`;
          expect(box, name).not.toBeNull();
          expect(box?.x ?? -1, name).toBeGreaterThanOrEqual(0);
          expect((box?.x ?? 0) + (box?.width ?? 0), name).toBeLessThanOrEqual(390);
          // Not clipped by a scrolling container: the point under its centre is the button.
          const hit = await button.evaluate((el) => {
            const r = el.getBoundingClientRect();
            const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return at !== null && el.contains(at);
          });
          expect(hit, name).toBe(true);
          seen[id] = (seen[id] ?? 0) + 1;
        }
      }
      // Approve and Deny; Copy link and Open; Remove of the one project.
      expect(seen).toMatchObject({ pairings: 2, pending: 2, projects: 1 });
      expect(seen.devices).toBeGreaterThanOrEqual(2);
      // Save and Delete of each user.
      expect(seen.users).toBeGreaterThanOrEqual(6);
    });

    it('fits the Add to selector and its longest choice, the long address, in the card', async () => {
      const card = phone.locator('.pair-card.highlight');
      const select = card.locator('select');
      const fit = await select.evaluate((el: HTMLSelectElement) => {
        const style = getComputedStyle(el);
        const context = document.createElement('canvas').getContext('2d');
        if (!context) throw new Error('no 2d canvas');
        context.font = `${style.fontSize} ${style.fontFamily}`;
        const widest = Math.max(...[...el.options].map((o) => context.measureText(o.text).width));
        // The arrow takes about 1.5em at the right.
        const room =
          el.clientWidth -
          Number.parseFloat(style.paddingLeft) -
          Number.parseFloat(style.paddingRight) -
          1.5 * Number.parseFloat(style.fontSize);
        const box = el.getBoundingClientRect();
        const card = el.closest('.pair-card')?.getBoundingClientRect();
        return {
          options: [...el.options].map((o) => o.text),
          widest,
          room,
          inside: card !== undefined && box.left >= card.left && box.right <= card.right,
        };
      });
      expect(fit.options).toContain(long);
      expect(fit.inside).toBe(true);
      expect(fit.widest).toBeLessThanOrEqual(fit.room);
    });

    it('shows a relay room by its project and user, the room id in small print', async () => {
      const room = phone.locator(`#relay tr[data-room="${project.roomId}"]`);
      const text = (await room.textContent()) ?? '';
      expect(text).toContain('Project notes');
      expect(text).toContain('owner@example.com');
      expect(text).toContain('Work laptop');
      expect(await room.locator('.room-id').getAttribute('title')).toBe(`Room ${project.roomId}`);
      expect(await room.locator('.room-id').textContent()).toBe(project.roomId);
      await phone.locator('#relay').screenshot({ path: join(screenshotsDir, 'relay-390.png') });
      await phone.locator('#devices').screenshot({ path: join(screenshotsDir, 'devices-390.png') });
    });

    it('keeps a room whose project was removed, shown by its id', async () => {
      const row = phone.locator(`#projects tr[data-project="${project.id}"]`);
      await row.getByRole('button', { name: 'Remove' }).click();
      await phone
        .getByRole('dialog')
        .getByRole('button', { name: /Remove/ })
        .click();
      await row.waitFor({ state: 'detached' });
      const room = phone.locator(`#relay tr[data-room="${project.roomId}"]`);
      await expect.poll(() => room.textContent()).toContain('No project');
      expect(await room.locator('.room-id').textContent()).toBe(project.roomId);
      expect(await room.textContent()).not.toContain('Project notes');
      expect(relay.socket.readyState).toBe(relay.socket.OPEN);
    });

    it('scrolls the section links sideways with a shadow at the edge that has more, and reaches the last', async () => {
      await phone.evaluate(() => window.scrollTo(0, 0));
      const nav = phone.getByRole('navigation', { name: 'Sections' });
      const line = await nav.evaluate((el) => ({
        scrollWidth: el.scrollWidth,
        clientWidth: el.clientWidth,
        image: getComputedStyle(el).backgroundImage,
        attachment: getComputedStyle(el).backgroundAttachment,
      }));
      // More links than fit in one line at 390 px: the line scrolls, so it needs its cue.
      expect(line.scrollWidth).toBeGreaterThan(line.clientWidth);
      // A shadow at each edge (fixed to the box) under a cover that scrolls with the links and
      // hides it once that edge is reached, as the tables have.
      expect(line.image.match(/radial-gradient/g)).toHaveLength(2);
      expect(line.attachment).toMatch(/^local, local, scroll, scroll\b/);
      await nav.evaluate((el) => {
        el.scrollLeft = 0;
      });
      await nav.screenshot({ path: join(screenshotsDir, 'tabs-390.png') });
      const last = nav.getByRole('link', { name: 'Connection' });
      const inLine = () =>
        last.evaluate((el) => {
          const r = el.getBoundingClientRect();
          const box = el.parentElement?.getBoundingClientRect();
          return box !== undefined && r.left >= box.left && r.right <= box.right;
        });
      expect(await inLine()).toBe(false);
      // A swipe along the line brings the last link in, and a tap on it goes to its section.
      await nav.evaluate((el) => {
        el.scrollLeft = el.scrollWidth;
      });
      expect(await inLine()).toBe(true);
      await last.click();
      await expect.poll(() => inView(phone.locator('#connection h2'))).toBe(true);
    });

    it('keeps the section links on screen after scrolling to the bottom', async () => {
      await phone.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
      const nav = phone.getByRole('navigation', { name: 'Sections' });
      const box = await nav.boundingBox();
      expect(box?.y).toBeGreaterThanOrEqual(0);
      expect(box?.y).toBeLessThan(844);
      await nav.getByRole('link', { name: /Pair a device/ }).click();
      await expect.poll(() => inView(phone.locator('#pairings h2'))).toBe(true);
    });
  });

  it('keeps the tables as tables at 1200 px', async () => {
    // Found and measured in one turn of the page: the UI redraws its tables every 2 s, and a
    // row found before a redraw is detached by the time it is measured (no display at all).
    const displays = await page.evaluate(() =>
      [...document.querySelectorAll('.table-scroll tbody tr')].map(
        (tr) => getComputedStyle(tr).display,
      ),
    );
    expect(displays.length).toBeGreaterThanOrEqual(4);
    for (const display of displays) expect(display).toBe('table-row');
    expect(await page.locator('#devices thead th').first().isVisible()).toBe(true);
    // Each fits its section: no button beyond a sideways scroll.
    const overflowing = await page
      .locator('.table-scroll')
      .evaluateAll((tables) =>
        tables
          .filter((t) => t.scrollWidth > t.clientWidth + 1)
          .map((t) => t.closest('section')?.id),
      );
    expect(overflowing).toEqual([]);
    expect(await page.evaluate(() => document.scrollingElement?.scrollWidth)).toBeLessThanOrEqual(
      1201,
    );
  });
});
