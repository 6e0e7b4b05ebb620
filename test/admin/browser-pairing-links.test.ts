import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasBrowser } from '../helpers/chromium.ts';
import type { TestHost } from '../helpers/host.ts';
import {
  type AdminPage,
  inView,
  openAdminPage,
  pollPairing,
  startPairing as startPairingAt,
  waitForCard,
} from './admin-page.ts';

/**
 * The admin UI in Chromium: a denied pairing, the approve URL of a pairing (highlighted, scrolled
 * to, asking for the admin token in a browser without it), a section named in the URL, and what
 * the page links to. (Without Chromium the whole UI suite is reported by browser-pairing.test.ts.)
 */
describe.skipIf(!hasBrowser)('admin UI pairing links and denial in Chromium', () => {
  let admin: AdminPage;
  let th: TestHost;

  const startPairing = (deviceName: string, platform: string) =>
    startPairingAt(th.base, deviceName, platform);

  beforeAll(async () => {
    admin = await openAdminPage();
    th = admin.th;
  });

  afterAll(async () => {
    await admin?.close();
  });

  it('denies: the device polls 403 pair_denied', async () => {
    const { started, c } = await waitForCard(admin.page, th.base, 'Unknown phone', 'android');
    await c.getByRole('button', { name: 'Deny' }).click();
    await expect
      .poll(() => admin.page.locator('#pairings-status').textContent())
      .toBe(`Denied ${started.code}: “Unknown phone” was not added.`);
    await c.waitFor({ state: 'detached' });
    const answer = await pollPairing(th.base, started.pairingId);
    expect(answer.status).toBe(403);
    expect(answer.body).toMatchObject({ error: { code: 'pair_denied' } });
  });

  it('opens the approve URL with that request highlighted and scrolled into view', async () => {
    const others = [await startPairing('Desk PC', 'windows'), await startPairing('Mac', 'darwin')];
    const wanted = await startPairing('Kitchen tablet', 'android');
    const small = await admin.page.context().newPage();
    // Short enough that the cards do not all fit: the page has to scroll to the wanted one.
    await small.setViewportSize({ width: 1200, height: 400 });
    expect(wanted.approveUrl).toBe(`${th.base}/admin/#pair=${wanted.code}`);
    // A fresh load with the token and the code (what the tray's "Pair a device" opens).
    await small.goto(`${th.base}/admin/#token=${th.host.adminToken}&pair=${wanted.code}`);
    const highlighted = (code: string) =>
      small.locator(`.pair-card[data-code="${code}"]`).getAttribute('class');
    await expect.poll(() => highlighted(wanted.code)).toContain('highlight');
    const target = small.locator(`.pair-card[data-code="${wanted.code}"]`);
    expect(await target.getAttribute('aria-current')).toBe('true');
    for (const other of others) expect(await highlighted(other.code)).not.toContain('highlight');
    await expect.poll(() => inView(target)).toBe(true);
    expect(await small.evaluate(() => scrollY)).toBeGreaterThan(0);

    // The approve URL of another pairing in the open tab moves the mark to that one.
    const [desk] = others;
    await small.goto(desk?.approveUrl ?? '');
    await expect.poll(() => highlighted(desk?.code ?? '')).toContain('highlight');
    expect(await highlighted(wanted.code)).not.toContain('highlight');

    // A code that is not waiting says so instead of showing nothing.
    await small.goto(`${th.base}/admin/#pair=bcdf-ghjk`);
    await expect
      .poll(() => small.locator('#pairings-status').textContent())
      .toMatch(/^No device with the code BCDF-GHJK is waiting/);
    await small.close();

    // A browser without the admin token (a phone that scanned the approve URL's QR code) asks
    // for it, then shows the request.
    const stranger = await admin.browser.newContext({ viewport: { width: 390, height: 844 } });
    const tab = await stranger.newPage();
    await tab.goto(wanted.approveUrl);
    await tab.getByLabel('Admin token').fill(th.host.adminToken);
    await tab.keyboard.press('Enter');
    await expect
      .poll(() => tab.locator(`.pair-card[data-code="${wanted.code}"]`).getAttribute('class'))
      .toContain('highlight');
    await stranger.close();
    for (const p of [...others, wanted]) await th.admin('POST', '/pairings/deny', { code: p.code });
  });

  it('opens at the section the URL names (the tray opens #pairings), once the data is shown', async () => {
    const context = await admin.browser.newContext({ viewport: { width: 1200, height: 400 } });
    const token = th.host.adminToken;
    await context.addInitScript((t) => sessionStorage.setItem('sync-host.adminToken', t), token);
    const tab = await context.newPage();
    await tab.goto(`${th.base}/admin/#connection`);
    await expect.poll(() => inView(tab.locator('#connection h2'))).toBe(true);
    await context.close();
  });

  it('leaves out the mDNS sentence when mDNS is off', async () => {
    const text = (await admin.page.locator('#connection').textContent()) ?? '';
    expect(text).toContain('Enter these in a client.');
    expect(text).not.toMatch(/mDNS|on the LAN/);
  });

  it('serves a favicon the page links to', async () => {
    const href = await admin.page.locator('link[rel="icon"]').getAttribute('href');
    const res = await fetch(new URL(href ?? '', `${th.base}/admin/`));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(await res.text()).toMatch(/^<svg [^>]*viewBox="0 0 64 64"/);
  });
});
