import { mkdirSync } from 'node:fs';
import type { Browser, Locator, Page } from 'playwright-core';
import { expect } from 'vitest';
import { launchChromium, screenshotsDir } from '../helpers/chromium.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

/** A pairing as the device starts it (`POST /auth/pair`). */
export interface Started {
  pairingId: string;
  code: string;
  approveUrl: string;
}

/** An in-process host with its admin UI open in Chromium at 1200 px, light colour scheme. */
export interface AdminPage {
  th: TestHost;
  browser: Browser;
  page: Page;
  /** Content Security Policy violations the page reported on its console. */
  cspViolations: string[];
  close(): Promise<void>;
}

/** Starts a host (no OWNER_EMAIL, free default tier) and opens its admin UI, live. */
export async function openAdminPage(): Promise<AdminPage> {
  // No OWNER_EMAIL: the first user approved is the owner.
  const th = await startTestHost({ auth: ['DEFAULT_TIER=free'] });
  const browser = await launchChromium();
  const context = await browser.newContext({
    viewport: { width: 1200, height: 860 },
    colorScheme: 'light',
  });
  const page = await context.newPage();
  const cspViolations: string[] = [];
  page.on('console', (msg) => {
    if (/Content Security Policy/i.test(msg.text())) cspViolations.push(msg.text());
  });
  mkdirSync(screenshotsDir, { recursive: true });
  await page.goto(th.host.urls.admin ?? '');
  await page.locator('#live.ok').waitFor();
  return {
    th,
    browser,
    page,
    cspViolations,
    async close() {
      await browser.close();
      await th.close();
    },
  };
}

/** Starts a pairing as a device would. */
export async function startPairing(
  base: string,
  deviceName: string,
  platform: string,
): Promise<Started> {
  const res = await fetch(`${base}/auth/pair`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ deviceName, platform }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Started;
}

/** Whether the element is entirely inside the window's visible area. */
export const inView = (locator: Locator) =>
  locator.evaluate((el) => {
    const r = el.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= innerHeight;
  });

/**
 * The device's poll of its pairing, as a client makes it: every `interval` (2 s from the start),
 * so 429s wait. The first answer that is not 429.
 */
export async function pollPairing(
  base: string,
  pairingId: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  let answer = { status: 0, body: {} as Record<string, unknown> };
  await expect
    .poll(
      async () => {
        const res = await fetch(`${base}/auth/pair/${pairingId}`);
        answer = { status: res.status, body: (await res.json()) as Record<string, unknown> };
        return answer.status;
      },
      { timeout: 10_000, interval: 500 },
    )
    .not.toBe(429);
  return answer;
}

/** Starts a pairing as a device would and waits for its card in the admin page. */
export async function waitForCard(page: Page, base: string, deviceName: string, platform: string) {
  const started = await startPairing(base, deviceName, platform);
  const c = page.locator(`#pairings .pair-card[data-code="${started.code}"]`);
  await c.waitFor({ timeout: 8_000 });
  return { started, c };
}
