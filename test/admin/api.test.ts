import { afterEach, describe, expect, it } from 'vitest';
import { joinRelay, registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

let th: TestHost | undefined;
afterEach(async () => {
  await th?.close();
  th = undefined;
});

type Json = Record<string, unknown>;

describe('admin API access', () => {
  it('answers 401 JSON without the admin token, with a wrong one, and for unknown routes', async () => {
    th = await startTestHost({ ui: false });
    const missing = await fetch(`${th.base}/admin/api/users`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await missing.json()).toEqual({
      error: { code: 'unauthorized', message: 'missing or invalid admin token' },
    });
    expect((await th.admin('GET', '/users', undefined, 'f'.repeat(64))).status).toBe(401);
    expect((await th.admin('GET', '/no-such-thing', undefined, 'nope')).status).toBe(401);
    const basic = await fetch(`${th.base}/admin/api/users`, {
      headers: { Authorization: `Basic ${th.host.adminToken}` },
    });
    expect(basic.status).toBe(401);
    const unknown = await th.admin('GET', '/no-such-thing');
    expect(unknown.status).toBe(404);
    expect((unknown.body as { error: Json }).error.code).toBe('not_found');
  });

  it('rate limits failed token attempts per client, logs them, and never logs a token', async () => {
    const logs: string[] = [];
    th = await startTestHost({ ui: false, failureLimit: { points: 3, seconds: 60 }, logs });
    const wrong = 'a'.repeat(64);
    for (let i = 0; i < 3; i++)
      expect((await th.admin('GET', '/users', undefined, wrong)).status).toBe(401);
    const blocked = await th.admin('GET', '/users', undefined, wrong);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // the right token passes from the same address; failures keep being refused
    expect((await th.admin('GET', '/users')).status).toBe(200);
    expect((await th.admin('GET', '/users', undefined, wrong)).status).toBe(429);
    const rejected = logs.filter((l) => l.includes('admin API: rejected'));
    expect(rejected.length).toBeGreaterThanOrEqual(3);
    expect(logs.join('\n')).not.toContain(wrong);
    expect(logs.join('\n')).not.toContain(th.host.adminToken);
  });

  it('answers JSON errors for malformed bodies and ids', async () => {
    th = await startTestHost({ ui: false });
    const badJson = await fetch(`${th.base}/admin/api/users`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${th.host.adminToken}`,
        'Content-Type': 'application/json',
      },
      body: '{"email":',
    });
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as { error: Json }).error.code).toBe('invalid_request');
    const badEmail = await th.admin('POST', '/users', { email: 'not-an-email' });
    expect(badEmail.status).toBe(400);
    expect((badEmail.body as { error: Json }).error.message).toMatch(/^email /);
    expect((await th.admin('DELETE', '/devices/abc')).status).toBe(400);
    expect((await th.admin('DELETE', '/devices/0')).status).toBe(400);
    expect((await th.admin('DELETE', '/devices/999')).status).toBe(404);
    expect((await th.admin('DELETE', '/projects/999')).status).toBe(404);
    expect((await th.admin('DELETE', '/users/999')).status).toBe(404);
    expect(
      (await th.admin('PUT', '/users/999/subscription', { tier: 'pro', expiresAt: null })).status,
    ).toBe(404);
  });
});

describe('users and tiers', () => {
  it('invites a user, lists users with tier, expiry and counts, and changes the tier', async () => {
    // The owner is someone else, so bob gets DEFAULT_TIER.
    th = await startTestHost({ ui: false, auth: ['OWNER_EMAIL=owner@example.com'] });
    const invited = await th.admin('POST', '/users', { email: '  Bob@Example.com ' });
    expect(invited.status).toBe(201);
    const bob = (invited.body as { user: Json }).user;
    expect(bob).toMatchObject({
      email: 'bob@example.com',
      tier: 'free',
      effectiveTier: 'free',
      expiresAt: null,
      deviceCount: 0,
      projectCount: 0,
    });
    expect((await th.admin('POST', '/users', { email: 'bob@example.com' })).status).toBe(200);

    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const set = await th.admin('PUT', `/users/${bob.id}/subscription`, { tier: 'pro', expiresAt });
    expect(set.status).toBe(200);
    expect((set.body as { subscription: Json }).subscription).toEqual({
      tier: 'pro',
      effectiveTier: 'pro',
      expiresAt,
      projectLimit: null,
    });

    const past = new Date(Date.now() - 1000).toISOString();
    await th.admin('PUT', `/users/${bob.id}/subscription`, { tier: 'personal', expiresAt: past });
    const users = (await th.admin('GET', '/users')).body as { users: Json[] };
    expect(users.users).toEqual([
      expect.objectContaining({
        email: 'bob@example.com',
        tier: 'personal',
        effectiveTier: 'free',
        expiresAt: past,
      }),
    ]);

    const badTier = await th.admin('PUT', `/users/${bob.id}/subscription`, {
      tier: 'gold',
      expiresAt: null,
    });
    expect(badTier.status).toBe(400);
    expect((badTier.body as { error: Json }).error.message).toMatch(/^tier /);
    const badDate = await th.admin('PUT', `/users/${bob.id}/subscription`, {
      tier: 'pro',
      expiresAt: 'tomorrow',
    });
    expect((badDate.body as { error: Json }).error.message).toMatch(/^expiresAt /);
  });

  it('lets an invited address sign in under SIGNUP=allowlist, and nobody else', async () => {
    th = await startTestHost({ ui: false, auth: ['SIGNUP=allowlist'] });
    await th.admin('POST', '/users', { email: 'carol@example.com' });
    for (const email of ['carol@example.com', 'mallory@example.com']) {
      await fetch(`${th.base}/auth/magic-link`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email }),
      });
    }
    const pending = (await th.admin('GET', '/pending-links')).body as {
      devMode: boolean;
      links: Json[];
    };
    expect(pending.devMode).toBe(true);
    expect(pending.links.map((l) => l.email)).toEqual(['carol@example.com']);
    expect(Object.keys(pending.links[0] ?? {}).sort()).toEqual([
      'createdAt',
      'email',
      'expiresAt',
      'link',
    ]);
  });

  it('deletes a user with devices and projects, closing their relay sockets with 4003', async () => {
    th = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=pro'] });
    const alice = await th.signIn('alice@example.com');
    const project = await registerProject(th.base, alice.deviceToken, 'notes');
    const relay = await joinRelay(th.relayUrl, project.roomId, alice.deviceId, alice.deviceToken);
    const counted = ((await th.admin('GET', '/users')).body as { users: Json[] }).users[0];
    expect(counted).toMatchObject({ deviceCount: 1, projectCount: 1, tier: 'pro' });

    expect((await th.admin('DELETE', `/users/${alice.userId}`)).status).toBe(204);
    expect(await relay.closed).toBe(4003);
    expect(((await th.admin('GET', '/users')).body as { users: Json[] }).users).toEqual([]);
    expect(((await th.admin('GET', '/devices')).body as { devices: Json[] }).devices).toEqual([]);
    expect(((await th.admin('GET', '/projects')).body as { projects: Json[] }).projects).toEqual(
      [],
    );
    const device = await fetch(`${th.base}/auth/device`, {
      headers: { Authorization: `Bearer ${alice.deviceToken}` },
    });
    expect(device.status).toBe(401);
  });
});

describe('devices, projects, pending links and relay', () => {
  it('lists devices with their connection state and revokes one at the auth service and the relay', async () => {
    th = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=personal'] });
    const alice = await th.signIn('alice@example.com', 'desk');
    const project = await registerProject(th.base, alice.deviceToken, 'work');
    const relay = await joinRelay(th.relayUrl, project.roomId, alice.deviceId, alice.deviceToken);

    const devices = ((await th.admin('GET', '/devices')).body as { devices: Json[] }).devices;
    expect(devices).toEqual([
      expect.objectContaining({
        id: alice.deviceId,
        userId: alice.userId,
        email: 'alice@example.com',
        deviceName: 'desk',
        platform: 'linux',
        connected: true,
      }),
    ]);
    expect(JSON.stringify(devices)).not.toContain(alice.deviceToken);
    const status = (await th.admin('GET', '/relay')).body as Json;
    expect(status).toEqual({
      state: 'running',
      rooms: 1,
      connections: 1,
      buffered: 0,
      perRoom: [
        {
          room: project.roomId,
          connections: 1,
          devices: [String(alice.deviceId)],
          project: {
            id: project.id,
            name: 'Project work',
            projectKey: 'work',
            email: 'alice@example.com',
          },
        },
      ],
    });

    expect((await th.admin('DELETE', `/devices/${alice.deviceId}`)).status).toBe(204);
    expect(await relay.closed).toBe(4003);
    const after = await fetch(`${th.base}/auth/device`, {
      headers: { Authorization: `Bearer ${alice.deviceToken}` },
    });
    expect(after.status).toBe(401);
    expect((await th.admin('DELETE', `/devices/${alice.deviceId}`)).status).toBe(404);
  });

  it('names each relay room by its project and user, and keeps the id of a room without a project', async () => {
    const current = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=team'] });
    th = current;
    const alice = await th.signIn('alice@example.com', 'desk');
    const bob = await th.signIn('bob@example.com', 'phone');
    const thesis = await registerProject(th.base, alice.deviceToken, 'thesis');
    const notes = await registerProject(th.base, bob.deviceToken, 'notes');
    const sockets = [
      await joinRelay(th.relayUrl, thesis.roomId, alice.deviceId, alice.deviceToken),
      await joinRelay(th.relayUrl, notes.roomId, bob.deviceId, bob.deviceToken),
    ];
    const rooms = async () =>
      ((await current.admin('GET', '/relay')).body as { perRoom: Json[] }).perRoom;
    expect(await rooms()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          room: thesis.roomId,
          project: {
            id: thesis.id,
            name: 'Project thesis',
            projectKey: 'thesis',
            email: 'alice@example.com',
          },
        }),
        expect.objectContaining({
          room: notes.roomId,
          project: {
            id: notes.id,
            name: 'Project notes',
            projectKey: 'notes',
            email: 'bob@example.com',
          },
        }),
      ]),
    );
    const overview = (await th.admin('GET', '/overview')).body as { relay: { perRoom: Json[] } };
    expect(overview.relay.perRoom).toEqual(await rooms());

    // Removed while its device stays connected: the room is still listed, by its id alone.
    expect((await th.admin('DELETE', `/projects/${thesis.id}`)).status).toBe(204);
    const after = await rooms();
    expect(after).toHaveLength(2);
    expect(after.find((r) => r.room === thesis.roomId)).toEqual({
      room: thesis.roomId,
      connections: 1,
      devices: [String(alice.deviceId)],
      project: null,
    });
    expect(after.find((r) => r.room === notes.roomId)?.project).toMatchObject({
      name: 'Project notes',
    });

    // Admin only: no project name, key or e-mail without the admin token.
    for (const path of ['/relay', '/overview']) {
      const res = await fetch(`${th.base}/admin/api${path}`);
      expect(res.status).toBe(401);
      const text = await res.text();
      for (const secret of ['thesis', 'notes', 'bob@example.com', notes.roomId])
        expect(text).not.toContain(secret);
    }
    for (const s of sockets) s.socket.close();
  });

  it('lists and removes projects of every user', async () => {
    th = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=team'] });
    const alice = await th.signIn('alice@example.com');
    const project = await registerProject(th.base, alice.deviceToken, 'k1');
    const listed = ((await th.admin('GET', '/projects')).body as { projects: Json[] }).projects;
    expect(listed).toEqual([
      expect.objectContaining({
        id: project.id,
        email: 'alice@example.com',
        projectKey: 'k1',
        roomId: project.roomId,
      }),
    ]);
    expect((await th.admin('DELETE', `/projects/${project.id}`)).status).toBe(204);
    expect(((await th.admin('GET', '/projects')).body as { projects: Json[] }).projects).toEqual(
      [],
    );
  });

  it('drops a pending link once it is used', async () => {
    th = await startTestHost({ ui: false });
    await th.signIn('dave@example.com');
    expect(((await th.admin('GET', '/pending-links')).body as { links: Json[] }).links).toEqual([]);
  });

  it('shows connection details and the relay as paused and resumed on the same port', async () => {
    th = await startTestHost({ ui: false });
    const connection = (await th.admin('GET', '/connection')).body as Json;
    expect(connection).toMatchObject({
      authUrl: th.base,
      relayUrl: th.relayUrl,
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      mdns: false,
    });
    await th.host.pauseRelay();
    expect(((await th.admin('GET', '/relay')).body as Json).state).toBe('paused');
    await th.host.resumeRelay();
    expect(((await th.admin('GET', '/relay')).body as Json).state).toBe('running');
    const alice = await th.signIn('erin@example.com');
    await th.admin('PUT', `/users/${alice.userId}/subscription`, { tier: 'pro', expiresAt: null });
    const project = await registerProject(th.base, alice.deviceToken, 'p');
    const relay = await joinRelay(th.relayUrl, project.roomId, alice.deviceId, alice.deviceToken);
    const current = th;
    await eventually(async () =>
      ((await current.admin('GET', '/relay')).body as Json).connections === 1 ? true : undefined,
    );
    relay.socket.close();
  });
});

describe('admin page', () => {
  it('serves the UI with a strict CSP and redirects /admin to /admin/', async () => {
    th = await startTestHost();
    const page = await fetch(`${th.base}/admin/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('<script type="module" src="app.js">');
    expect((await fetch(`${th.base}/admin/app.js`)).headers.get('content-type')).toMatch(
      /javascript/,
    );
    const redirect = await fetch(`${th.base}/admin`, { redirect: 'manual' });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/admin/');
    expect(th.host.urls.admin).toBe(`${th.base}/admin/#token=${th.host.adminToken}`);
  });
});
