import type { Browser, Page } from 'playwright-core';
import QRCode from 'qrcode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import { qrOptions } from '../../renderer/qr.ts';
import { chromiumPath, hasBrowser, launchChromium, requireBrowser } from '../helpers/chromium.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

if (!hasBrowser && requireBrowser) {
  describe('admin UI of a host with TLS, in Chromium', () => {
    it(`needs ${chromiumPath} (REQUIRE_BROWSER=1)`, () => {
      expect.fail(`${chromiumPath} is missing and REQUIRE_BROWSER=1 is set`);
    });
  });
}

describe.skipIf(!hasBrowser)('admin UI of a host with TLS, in Chromium', () => {
  let th: TestHost;
  let browser: Browser;
  let page: Page;
  let fingerprint: string;

  beforeAll(async () => {
    th = await startTestHost({ auth: ['TLS=self-signed'] });
    fingerprint = th.host.fingerprint ?? '';
    browser = await launchChromium();
    // The person accepted the self-signed certificate once, as the browser asks them to.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    page = await context.newPage();
    await page.goto(th.host.urls.admin ?? '');
    await page.locator('#live.ok').waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await th?.close();
  });

  it('shows the certificate fingerprint, its short form, and a QR code carrying it (#fp=)', async () => {
    expect(th.base).toMatch(/^https:\/\//);
    expect(await page.locator('#conn-fingerprint').inputValue()).toBe(fingerprint);
    expect(await page.locator('#conn-fingerprint-short').textContent()).toContain(
      shortFingerprint(fingerprint),
    );
    const img = page.locator('#connection img.qr');
    await expect
      .poll(() => img.evaluate((el: HTMLImageElement) => el.naturalWidth))
      .toBeGreaterThan(0);
    const text = `${th.base}/#fp=${fingerprint}`;
    expect(await img.getAttribute('data-text')).toBe(text);
    const expected = await QRCode.toString(text, qrOptions);
    expect(await img.getAttribute('src')).toBe(
      `data:image/svg+xml;charset=utf-8,${encodeURIComponent(expected)}`,
    );
  });
});
