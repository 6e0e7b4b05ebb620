import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium (apt-get install -y chromium); CHROMIUM_PATH overrides. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasBrowser = existsSync(chromiumPath);
export const requireBrowser = process.env.REQUIRE_BROWSER === '1';
/** Flags for a closed network, as root, without a GPU. */
export const chromiumFlags = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** docs/screenshots/ with UPDATE_SCREENSHOTS=1 (after a UI change), else a temp folder. */
export const screenshotsDir =
  process.env.UPDATE_SCREENSHOTS === '1'
    ? join(import.meta.dirname, '..', '..', 'docs', 'screenshots')
    : join(tmpdir(), 'sync-host-screenshots');

/** Chromium without a profile (each context is a fresh one), light colour scheme by default. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumFlags });
}
