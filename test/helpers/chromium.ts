import { existsSync } from 'node:fs';

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
