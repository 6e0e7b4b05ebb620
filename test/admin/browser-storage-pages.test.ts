import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPath, hasBrowser, requireBrowser } from '../helpers/chromium.ts';
import { registerProject } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { type AdminPage, openAdminPage } from './admin-page.ts';

/**
 * The stored documents' section shows one page of projects (50, the largest first) with
 * Previous and Next, and a folder's names only when its list is opened.
 */

if (!hasBrowser && requireBrowser) {
  describe('admin UI storage pages in Chromium', () => {
    it(`needs ${chromiumPath} (REQUIRE_BROWSER=1)`, () => {
      expect.fail(`${chromiumPath} is missing and REQUIRE_BROWSER=1 is set`);
    });
  });
}

describe.skipIf(!hasBrowser)('admin UI storage pages in Chromium', () => {
  let admin: AdminPage;
  const clients: RelayClient[] = [];
  beforeAll(async () => {
    admin = await openAdminPage();
  });
  afterAll(async () => {
    for (const client of clients) client.terminate();
    await admin?.close();
  });

  it('pages the projects and asks for a folder’s names when its list is opened', async () => {
    const { th, page } = admin;
    const alice = await th.signIn('alice-pages@example.com', 'alice laptop');
    await th.admin('PUT', `/users/${alice.userId}/subscription`, { tier: 'team', expiresAt: null });
    const rooms: string[] = [];
    for (let i = 0; i < 53; i++) {
      const project = await registerProject(th.base, alice.deviceToken, `p${i}`);
      const client = new RelayClient(th.relayUrl);
      clients.push(client);
      expect(await client.join(project.roomId, alice.deviceId, alice.deviceToken)).toMatchObject({
        type: 'joined',
      });
      // Each project's report one name longer than the one before: the last is the largest.
      const names = Array.from({ length: i + 1 }, (_, n) => `p${i}/file-${n}.txt`);
      client.send({
        type: 'folder-report',
        doc: 'folder',
        files: i + 1,
        bytes: 1,
        encrypted: false,
        names,
      });
      await client.sync();
      client.terminate();
      rooms.unshift(project.roomId);
    }
    const shown = page.locator('#storage tr[data-room]');
    const pager = page.locator('#storage .pager');
    await expect
      .poll(() => pager.textContent(), { timeout: 8_000 })
      .toContain('Projects 1–50 of 53');
    expect(await shown.count()).toBe(50);
    expect(await shown.first().getAttribute('data-room')).toBe(rooms[0]);
    // No name travels with the page; the largest project's come when its list is opened.
    expect(await page.locator('#storage').textContent()).not.toContain('file-0.txt');
    const largest = shown.first();
    await largest.locator('details.file-names summary').click();
    await expect.poll(() => largest.locator('details.file-names li').count()).toBe(53);
    expect(await largest.locator('details.file-names li').first().textContent()).toBe(
      'p52/file-0.txt',
    );
    await pager.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => pager.textContent()).toContain('Projects 51–53 of 53');
    await expect.poll(() => shown.count()).toBe(3);
    expect(await shown.last().getAttribute('data-room')).toBe(rooms[52]);
    expect(await pager.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await pager.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(() => shown.count()).toBe(50);
  }, 120_000);
});
