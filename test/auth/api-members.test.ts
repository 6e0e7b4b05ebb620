import { expect, it } from 'vitest';
import { verifyRoomGrant } from '../../server/tokens.ts';
import type { AuthHarness, SignedIn } from '../helpers/auth-harness.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits, tierSetter } from './api-helpers.ts';

interface Listed {
  id: number;
  userId: number;
  projectKey: string;
  roomId: string;
  role: string;
  owner: { userId: number; email: string };
  grant?: string;
}

await describeEachDatabase('auth API: project members', { limits: roomyLimits }, (h) => {
  const setTier = tierSetter(h);

  async function teamProject(key = 'notes'): Promise<{ owner: SignedIn; project: Listed }> {
    const owner = await h.signIn(freshEmail());
    await setTier(owner.user.id, 'team');
    const res = await h.request('POST', '/auth/project', {
      token: owner.deviceToken,
      body: { projectKey: key, name: key },
    });
    expect(res.status).toBe(201);
    return { owner, project: ((await res.json()) as { project: Listed }).project };
  }

  const share = (h2: AuthHarness, token: string, id: number, email: string, role: string) =>
    h2.request('POST', `/auth/project/${id}/members`, { token, body: { email, role } });

  const listed = async (token: string): Promise<Listed[]> =>
    ((await (await h.request('GET', '/auth/projects', { token })).json()) as { projects: Listed[] })
      .projects;

  it('shares a project: the member lists it with role, owner and a grant for its room, and it counts against the owner alone', async () => {
    const { owner, project } = await teamProject();
    const member = await h.signIn(freshEmail());
    const res = await share(h, owner.deviceToken, project.id, member.user.email, 'editor');
    expect(res.status).toBe(201);
    const { member: added } = (await res.json()) as { member: Record<string, unknown> };
    expect(added).toMatchObject({
      userId: member.user.id,
      email: member.user.email,
      role: 'editor',
    });
    expect(Object.keys(added).sort()).toEqual(['addedAt', 'email', 'role', 'userId']);
    // the member is on free (no project of its own allowed) and still gets the shared one
    const [shared, ...rest] = await listed(member.deviceToken);
    expect(rest).toEqual([]);
    expect(shared).toMatchObject({
      id: project.id,
      roomId: project.roomId,
      role: 'editor',
      owner: { userId: owner.user.id, email: owner.user.email },
    });
    expect(verifyRoomGrant(shared?.grant, h.secret, project.roomId, member.user.id)).toMatchObject({
      role: 'editor',
    });
    expect(verifyRoomGrant(shared?.grant, h.secret, project.roomId, owner.user.id)).toBeUndefined();
    const own = await listed(owner.deviceToken);
    expect(own).toEqual([
      { ...project, role: 'owner', owner: { userId: owner.user.id, email: owner.user.email } },
    ]);
    const members = await h.request('GET', `/auth/project/${project.id}/members`, {
      token: member.deviceToken,
    });
    expect(members.status).toBe(200);
    expect(await members.json()).toEqual({
      owner: { userId: owner.user.id, email: owner.user.email },
      members: [added],
      // every device of the owner and the members, by name (what history names changes by)
      devices: [
        { id: owner.device.id, userId: owner.user.id, deviceName: owner.device.deviceName },
        { id: member.device.id, userId: member.user.id, deviceName: member.device.deviceName },
      ],
    });
  });

  it('invites an unknown e-mail as a user, and sharing again with the same role answers 200', async () => {
    const { owner, project } = await teamProject();
    const email = freshEmail();
    const first = await share(h, owner.deviceToken, project.id, email.toUpperCase(), 'viewer');
    expect(first.status).toBe(201);
    const again = await share(h, owner.deviceToken, project.id, email, 'viewer');
    expect(again.status).toBe(200);
    const invited = await h.signIn(email);
    expect((await listed(invited.deviceToken)).map((p) => [p.id, p.role])).toEqual([
      [project.id, 'viewer'],
    ]);
  });

  it('refuses sharing unless the owner is on an effective team tier (tier_required)', async () => {
    const owner = await h.signIn(freshEmail());
    await setTier(owner.user.id, 'pro');
    const created = await h.request('POST', '/auth/project', {
      token: owner.deviceToken,
      body: { projectKey: 'p', name: 'p' },
    });
    const { project } = (await created.json()) as { project: Listed };
    const res = await share(h, owner.deviceToken, project.id, freshEmail(), 'editor');
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('tier_required');
    expect(body.error.message).toMatch(/team tier.*administrator/);
    await setTier(owner.user.id, 'team', new Date(h.clock.now - 1_000));
    expect(
      await errorCode(await share(h, owner.deviceToken, project.id, freshEmail(), 'editor')),
    ).toBe('tier_required');
  });

  it('changes a role, and replaces the grant (the old one names an older membership)', async () => {
    const { owner, project } = await teamProject();
    const member = await h.signIn(freshEmail());
    await share(h, owner.deviceToken, project.id, member.user.email, 'editor');
    const [before] = await listed(member.deviceToken);
    const res = await h.request('PATCH', `/auth/project/${project.id}/members/${member.user.id}`, {
      token: owner.deviceToken,
      body: { role: 'viewer' },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { member: { role: string } }).member.role).toBe('viewer');
    const [after] = await listed(member.deviceToken);
    expect(after?.role).toBe('viewer');
    const old = verifyRoomGrant(before?.grant, h.secret, project.roomId, member.user.id);
    const now = verifyRoomGrant(after?.grant, h.secret, project.roomId, member.user.id);
    expect(now?.role).toBe('viewer');
    expect(now?.memberId).toBeGreaterThan(old?.memberId ?? Number.POSITIVE_INFINITY);
    const bad = await h.request('PATCH', `/auth/project/${project.id}/members/${member.user.id}`, {
      token: owner.deviceToken,
      body: { role: 'owner' },
    });
    expect(bad.status).toBe(400);
    expect(await errorCode(bad)).toBe('invalid_request');
  });

  it('lets the owner remove a member and a member leave; a member changing others is forbidden', async () => {
    const { owner, project } = await teamProject();
    const a = await h.signIn(freshEmail());
    const b = await h.signIn(freshEmail());
    await share(h, owner.deviceToken, project.id, a.user.email, 'editor');
    await share(h, owner.deviceToken, project.id, b.user.email, 'editor');
    const path = (user: number) => `/auth/project/${project.id}/members/${user}`;
    const byA = await h.request('DELETE', path(b.user.id), { token: a.deviceToken });
    expect(byA.status).toBe(403);
    expect(await errorCode(byA)).toBe('forbidden');
    expect(await errorCode(await share(h, a.deviceToken, project.id, freshEmail(), 'editor'))).toBe(
      'forbidden',
    );
    const patchByA = await h.request('PATCH', path(b.user.id), {
      token: a.deviceToken,
      body: { role: 'viewer' },
    });
    expect(await errorCode(patchByA)).toBe('forbidden');
    expect((await h.request('DELETE', path(a.user.id), { token: a.deviceToken })).status).toBe(204);
    expect(await listed(a.deviceToken)).toEqual([]);
    expect((await h.request('DELETE', path(b.user.id), { token: owner.deviceToken })).status).toBe(
      204,
    );
    expect(await listed(b.deviceToken)).toEqual([]);
    const again = await h.request('DELETE', path(b.user.id), { token: owner.deviceToken });
    expect(await errorCode(again)).toBe('not_found');
  });

  it('answers not_found for a project the caller neither owns nor is a member of, on every endpoint', async () => {
    const { owner, project } = await teamProject();
    const member = await h.signIn(freshEmail());
    await share(h, owner.deviceToken, project.id, member.user.email, 'editor');
    const stranger = await h.signIn(freshEmail());
    await setTier(stranger.user.id, 'team');
    const token = stranger.deviceToken;
    const base = `/auth/project/${project.id}/members`;
    const answers = [
      await h.request('GET', base, { token }),
      await h.request('POST', base, { token, body: { email: freshEmail(), role: 'editor' } }),
      await h.request('PATCH', `${base}/${member.user.id}`, { token, body: { role: 'viewer' } }),
      await h.request('DELETE', `${base}/${member.user.id}`, { token }),
      await h.request('DELETE', `${base}/${stranger.user.id}`, { token }),
      await h.request('DELETE', `/auth/project/${project.id}`, { token }),
      await h.request('GET', '/auth/project/999999/members', { token: owner.deviceToken }),
    ];
    for (const res of answers) {
      expect(res.status).toBe(404);
      expect(await errorCode(res)).toBe('not_found');
    }
    // a member cannot delete the project either
    const byMember = await h.request('DELETE', `/auth/project/${project.id}`, {
      token: member.deviceToken,
    });
    expect(byMember.status).toBe(404);
    expect((await listed(member.deviceToken)).map((p) => p.id)).toEqual([project.id]);
    expect(await listed(token)).toEqual([]);
  });

  it('refuses bad input with invalid_request naming the field', async () => {
    const { owner, project } = await teamProject();
    const base = `/auth/project/${project.id}/members`;
    const token = owner.deviceToken;
    const cases: Array<[string, string, unknown, RegExp]> = [
      ['POST', base, { email: 'not-an-address', role: 'editor' }, /^email /],
      ['POST', base, { email: freshEmail(), role: 'admin' }, /^role /],
      ['POST', base, { email: freshEmail() }, /^role /],
      ['POST', base, { email: owner.user.email, role: 'editor' }, /owner/],
      ['PATCH', `${base}/abc`, { role: 'viewer' }, /^userId /],
      ['GET', '/auth/project/0/members', undefined, /^id /],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await h.request(method, path, { token, ...(body === undefined ? {} : { body }) });
      expect(res.status).toBe(400);
      const answer = (await res.json()) as { error: { code: string; message: string } };
      expect(answer.error.code).toBe('invalid_request');
      expect(answer.error.message).toMatch(message);
    }
  });

  it('drops the memberships with the project and with the member’s user', async () => {
    const { owner, project } = await teamProject();
    const member = await h.signIn(freshEmail());
    await share(h, owner.deviceToken, project.id, member.user.email, 'viewer');
    expect(
      (await h.request('DELETE', `/auth/project/${project.id}`, { token: owner.deviceToken }))
        .status,
    ).toBe(204);
    expect(await listed(member.deviceToken)).toEqual([]);
    const second = await teamProject('second');
    const leaving = await h.signIn(freshEmail());
    await share(h, second.owner.deviceToken, second.project.id, leaving.user.email, 'editor');
    await h.server.service.deleteUser(leaving.user.id);
    const members = await h.request('GET', `/auth/project/${second.project.id}/members`, {
      token: second.owner.deviceToken,
    });
    expect(((await members.json()) as { members: unknown[] }).members).toEqual([]);
  });
});
