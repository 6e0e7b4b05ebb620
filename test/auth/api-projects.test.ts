import { expect, it } from 'vitest';
import { verifyRoomId } from '../../server/tokens.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits, tierSetter } from './api-helpers.ts';

await describeEachDatabase('auth API: projects and tiers', { limits: roomyLimits }, (h) => {
  const setTier = tierSetter(h);

  it('refuses projects on the free tier with project_limit', async () => {
    const me = await h.signIn(freshEmail());
    const res = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: 'k', name: 'n' },
    });
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe('project_limit');
  });

  it('allows one project on personal, idempotently, and issues a signed room id of the user', async () => {
    const me = await h.signIn(freshEmail());
    await setTier(me.user.id, 'personal');
    const first = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: '/home/me/code', name: 'code' },
    });
    expect(first.status).toBe(201);
    const { project } = (await first.json()) as {
      project: { id: number; roomId: string; userId: number };
    };
    expect(Object.keys(project).sort()).toEqual([
      'createdAt',
      'id',
      'name',
      'projectKey',
      'roomId',
      'userId',
    ]);
    expect(verifyRoomId(project.roomId, h.secret)).toBe(me.user.id);
    const again = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: '/home/me/code', name: 'renamed' },
    });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { project: unknown }).project).toEqual(project);
    const second = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: 'other', name: 'x' },
    });
    expect(second.status).toBe(403);
    const list = await h.request('GET', '/auth/projects', { token: me.deviceToken });
    expect(((await list.json()) as { projects: unknown[] }).projects).toEqual([
      { ...project, role: 'owner', owner: { userId: me.user.id, email: me.user.email } },
    ]);
  });

  it('registers one record when the same key is registered concurrently', async () => {
    const me = await h.signIn(freshEmail());
    await setTier(me.user.id, 'personal');
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey: 'same', name: 'n' },
        }),
      ),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(9);
    const ids = new Set(
      await Promise.all(
        answers.map(async (r) => ((await r.json()) as { project: { id: number } }).project.id),
      ),
    );
    expect(ids.size).toBe(1);
  });

  it('never lets concurrent registrations of different keys pass the personal limit', async () => {
    const me = await h.signIn(freshEmail());
    await setTier(me.user.id, 'personal');
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey: `k${i}`, name: 'n' },
        }),
      ),
    );
    expect(answers.filter((r) => r.status === 201)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 403)).toHaveLength(7);
  });

  it('counts an expired subscription as free: existing keys still answer 200, new ones are refused', async () => {
    const me = await h.signIn(freshEmail());
    await setTier(me.user.id, 'pro', new Date(h.clock.now + 60_000));
    const sub = await h.request('GET', '/auth/subscription', { token: me.deviceToken });
    expect(await sub.json()).toMatchObject({
      tier: 'pro',
      effectiveTier: 'pro',
      projectLimit: null,
    });
    for (const key of ['a', 'b', 'c']) {
      expect(
        (
          await h.request('POST', '/auth/project', {
            token: me.deviceToken,
            body: { projectKey: key, name: key },
          })
        ).status,
      ).toBe(201);
    }
    h.clock.advance(61_000);
    const expired = await h.request('GET', '/auth/subscription', { token: me.deviceToken });
    const body = (await expired.json()) as {
      tier: string;
      effectiveTier: string;
      projectLimit: number | null;
      expiresAt: string;
    };
    expect(body).toMatchObject({ tier: 'pro', effectiveTier: 'free', projectLimit: 0 });
    expect(Date.parse(body.expiresAt)).toBeLessThan(h.clock.now);
    expect(
      (
        await h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey: 'a', name: 'a' },
        })
      ).status,
    ).toBe(200);
    const fresh = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: 'd', name: 'd' },
    });
    expect(fresh.status).toBe(403);
    const list = await h.request('GET', '/auth/projects', { token: me.deviceToken });
    expect(((await list.json()) as { projects: unknown[] }).projects).toHaveLength(3);
  });

  it('deletes only the caller’s projects: another user’s id is 404', async () => {
    const me = await h.signIn(freshEmail());
    const other = await h.signIn(freshEmail());
    await setTier(me.user.id, 'team');
    const created = await h.request('POST', '/auth/project', {
      token: me.deviceToken,
      body: { projectKey: 'p', name: 'p' },
    });
    const { project } = (await created.json()) as { project: { id: number } };
    const foreign = await h.request('DELETE', `/auth/project/${project.id}`, {
      token: other.deviceToken,
    });
    expect(foreign.status).toBe(404);
    expect(await errorCode(foreign)).toBe('not_found');
    expect(
      (await h.request('DELETE', `/auth/project/${project.id}`, { token: me.deviceToken })).status,
    ).toBe(204);
    expect(
      (await h.request('DELETE', `/auth/project/${project.id}`, { token: me.deviceToken })).status,
    ).toBe(404);
  });
});
