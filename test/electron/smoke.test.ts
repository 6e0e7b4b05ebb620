import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { _electron } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { buildElectronBundles } from '../../build/electron-bundle.ts';
import { electronBinary } from '../../program/main.ts';

const root = join(import.meta.dirname, '..', '..');
const binary = electronBinary();
const title =
  binary === undefined
    ? 'Electron tray app (skipped: the Electron binary is not installed; its download script is denied in allowScripts, or no network)'
    : 'Electron tray app';

describe.skipIf(binary === undefined)(title, () => {
  it('starts the embedded host and shows the dashboard through the preload token', async () => {
    await buildElectronBundles(root);
    const dir = mkdtempSync(join(tmpdir(), 'sync-host-electron-'));
    writeFileSync(join(dir, 'auth.conf'), 'PORT=0\nBIND=127.0.0.1\nMDNS=off\n');
    writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
    const app = await _electron.launch({
      executablePath: binary,
      args: ['--no-sandbox', root, '--config-dir', dir],
      env: { ...process.env, ELECTRON_DISABLE_SECURITY_WARNINGS: '1' },
    });
    try {
      await app.evaluate(({ app: electronApp }) => electronApp.emit('second-instance'));
      const window = await app.firstWindow();
      await window.locator('#live').filter({ hasText: /^Live/ }).waitFor({ timeout: 15_000 });
      // The tray's host speaks TLS by default: the page loaded over https through the window's
      // certificate check (electron/certificate-trust.ts), which accepts the host's own
      // self-signed certificate only.
      expect(window.url()).toMatch(/^https:\/\/.*\/admin\/$/);
      expect(await window.evaluate(() => typeof (window as { require?: unknown }).require)).toBe(
        'undefined',
      );
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
