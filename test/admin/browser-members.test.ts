import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPath, hasBrowser, requireBrowser } from '../helpers/chromium.ts';
import { registerProject } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { listedProject, share } from '../helpers/team.ts';
import { type AdminPage, openAdminPage } from './admin-page.ts';

if (!hasBrowser && requireBrowser) {
  describe('admin UI members in Chromium', () => {
    it(`needs ${chromiumPath} (REQUIRE_BROWSER=1)`, () => {
      expect.fail(`${chromiumPath} is missing and REQUIRE_BROWSER=1 is set`);
    });
  });
}

describe.skipIf(!hasBrowser)('admin UI members in Chromium', () => {
  let admin: AdminPage;
  const clients: RelayClient[] = [];
  beforeAll(async () => {
    admin = await openAdminPage();
  });
  afterAll(async () => {
    for (const client of clients) client.terminate();
    await admin?.close();
  });

  it('lists a shared project’s members and removes one after confirmation (its relay socket closes with 4003)', async () => {
    const { th, page } = admin;
    const owner = await th.signIn('owner-ui@example.com', 'owner laptop');
    const member = await th.signIn('member-ui@example.com', 'member laptop');
    await th.admin('PUT', `/users/${owner.userId}/subscription`, { tier: 'team', expiresAt: null });
    const project = await registerProject(th.base, owner.deviceToken, 'team-notes');
    await share(th.base, owner, project.id, 'member-ui@example.com', 'editor');
    const { grant } = await listedProject(th.base, member, project.id);
    const client = new RelayClient(th.relayUrl);
    clients.push(client);
    expect(
      await client.joinWithGrant(project.roomId, member.deviceId, member.deviceToken, grant),
    ).toMatchObject({ type: 'joined' });

    const row = page.locator(`#projects tr[data-project="${project.id}"]`);
    const listed = row.locator('[data-member="member-ui@example.com"]');
    await listed.waitFor({ timeout: 8_000 });
    expect(await listed.textContent()).toContain('(editor)');
    await listed.getByRole('button', { name: 'Remove' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('member-ui@example.com');
    await dialog.getByRole('button', { name: 'Remove member' }).click();
    expect((await client.waitClosed(5_000)).code).toBe(4003);
    await expect.poll(() => listed.count(), { timeout: 8_000 }).toBe(0);
    expect(await row.count()).toBe(1);
  });
});
