import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEditorExample } from '../../examples/editor/build.ts';
import { openYjsRoom, type YjsRoom } from '../client/yjs-room.ts';
import * as chromium from '../helpers/chromium.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

const { hasBrowser, requireBrowser, screenshotsDir } = chromium;
const title = hasBrowser
  ? 'editor example in two Chromium pages'
  : `editor example in two Chromium pages (skipped: ${chromium.chromiumPath} not found; REQUIRE_BROWSER=1 to fail)`;

/** The example as `npm run build:example` makes it, served from memory on 127.0.0.1:0. */
async function serveExample(): Promise<{ server: Server; url: string }> {
  const built = await buildEditorExample(join('/tmp', 'sync-host-editor-example'), false);
  const bundle = (built.outputFiles ?? []).find((file) => file.path.endsWith('editor.js'));
  if (bundle === undefined) throw new Error('no editor.js in the build');
  const html = readFileSync('examples/editor/index.html');
  const server = createServer((req, res) => {
    const isBundle = req.url === '/editor.js';
    res.writeHead(200, {
      'Content-Type': isBundle ? 'text/javascript' : 'text/html; charset=utf-8',
    });
    res.end(isBundle ? bundle.contents : html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, url: `http://127.0.0.1:${address.port}/` };
}

/** The text of the example's document in a page. */
function pageText(page: Page): Promise<string | undefined> {
  return page.evaluate(() => window.syncExample?.doc.getText('text').toString());
}

describe.skipIf(!hasBrowser && !requireBrowser)(title, () => {
  let th: TestHost;
  let room: YjsRoom;
  let browser: Browser;
  let site: { server: Server; url: string };

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    room = await openYjsRoom(th, 'editor@example.org', 'editor', 2);
    site = await serveExample();
    browser = await chromium.launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    site?.server.close();
    await room?.close();
    await th?.close();
  });

  it('keeps one document in step while both pages type at once, with the other cursor shown', async () => {
    const pages: Page[] = [];
    for (const device of room.devices) {
      const page = await browser.newPage({ viewport: { width: 760, height: 420 } });
      const hash = new URLSearchParams({
        relay: th.relayUrl,
        room: room.roomId,
        token: device.deviceToken,
      });
      await page.goto(`${site.url}#${hash}`);
      pages.push(page);
    }
    const [one, two] = pages as [Page, Page];
    for (const page of pages) {
      await eventually(
        () => page.evaluate(() => window.syncExample?.synced === true),
        'synced',
        15_000,
      );
    }
    await one.click('.cm-content');
    await two.click('.cm-content');
    await Promise.all([
      one.keyboard.type('Typed in page one. ', { delay: 5 }),
      two.keyboard.type('Typed in page two. ', { delay: 5 }),
    ]);
    const text = await eventually(
      async () => {
        const [a, b] = await Promise.all([pageText(one), pageText(two)]);
        return a !== undefined && a === b && a.length === 38 ? a : undefined;
      },
      'both pages with both sentences',
      15_000,
    );
    expect(text).toContain('Typed in page one. ');
    expect(text).toContain('Typed in page two. ');
    // What each editor shows, without the other device's caret and its name label.
    for (const page of pages) {
      const shown = await page.evaluate(() => {
        const content = document.querySelector('.cm-content')?.cloneNode(true) as HTMLElement;
        for (const caret of content.querySelectorAll('.cm-ySelectionCaret')) caret.remove();
        return content.textContent;
      });
      expect(shown).toBe(text);
    }
    // The other device's cursor, drawn by y-codemirror.next from the awareness states.
    await one.locator('.cm-ySelectionCaret').first().waitFor({ timeout: 10_000 });
    // the status names the other page's device, by its id
    const [, other] = room.devices;
    await expect(one.locator('#status').innerText()).resolves.toMatch(
      new RegExp(`in sync · device \\d+ · also here: device ${other?.deviceId}$`),
    );
    mkdirSync(screenshotsDir, { recursive: true });
    await one.screenshot({ path: join(screenshotsDir, 'editor-example.png') });
  }, 60_000);

  it('gives one page alone its document back from the host when reloaded (encrypted)', async () => {
    const [device] = room.devices;
    const page = await browser.newPage({ viewport: { width: 760, height: 420 } });
    const hash = new URLSearchParams({
      relay: th.relayUrl,
      room: room.roomId,
      token: device!.deviceToken,
      doc: 'alone',
      passphrase: 'page passphrase',
    });
    await page.goto(`${site.url}#${hash}`);
    const synced = () =>
      eventually(() => page.evaluate(() => window.syncExample?.synced === true), 'synced', 15_000);
    await synced();
    await page.click('.cm-content');
    await page.keyboard.type('Kept by the host. ', { delay: 5 });
    await eventually(async () => (await pageText(page)) === 'Kept by the host. ', 'typed');
    // The host has stored every edit of the page (no other device is in the room).
    await page.evaluate(() => window.syncExample?.flush());
    await page.reload();
    await synced();
    expect(await pageText(page)).toBe('Kept by the host. ');
    await expect(page.locator('.cm-content').innerText()).resolves.toBe('Kept by the host. ');
    await page.close();
  }, 60_000);
});
