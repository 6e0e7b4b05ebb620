import { afterEach, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { listedProject, share } from '../helpers/team.ts';

type Json = Record<string, unknown>;

describe('admin API: a shared project’s members', () => {
  let th: TestHost | undefined;
  const clients: RelayClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    await th?.close();
    th = undefined;
  });

  it('lists each project’s owner and members, and removes a member, closing its connections with 4003', async () => {
    const host = await startTestHost({ ui: false });
    th = host;
    const owner = await host.signIn('owner-admin@example.com');
    const member = await host.signIn('member-admin@example.com');
    await host.admin('PUT', `/users/${owner.userId}/subscription`, {
      tier: 'team',
      expiresAt: null,
    });
    const project = await registerProject(host.base, owner.deviceToken, 'notes');
    await share(host.base, owner, project.id, 'member-admin@example.com', 'viewer');
    const { grant } = await listedProject(host.base, member, project.id);
    const client = new RelayClient(host.relayUrl);
    clients.push(client);
    expect(
      await client.joinWithGrant(project.roomId, member.deviceId, member.deviceToken, grant),
    ).toMatchObject({ type: 'joined' });

    const listed = ((await host.admin('GET', '/projects')).body as { projects: Json[] }).projects;
    expect(listed).toEqual([
      expect.objectContaining({
        id: project.id,
        email: 'owner-admin@example.com',
        members: [
          {
            userId: member.userId,
            email: 'member-admin@example.com',
            role: 'viewer',
            addedAt: expect.any(String),
          },
        ],
      }),
    ]);
    const path = `/projects/${project.id}/members/${member.userId}`;
    expect((await host.admin('DELETE', path)).status).toBe(204);
    expect((await client.waitClosed(5_000)).code).toBe(4003);
    const after = ((await host.admin('GET', '/projects')).body as { projects: Json[] }).projects;
    expect(after[0]).toMatchObject({ members: [] });
    const again = await host.admin('DELETE', path);
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({ error: { code: 'not_found' } });
    const bad = await host.admin('DELETE', `/projects/${project.id}/members/x`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'invalid_request' } });
  });
});
