import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signLoginJwt } from '../../server/auth/jwt.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';

const secret = 'security-suite-secret-3f9a1c0d7e5b';

/** Every secret and token this file issues or forges: none may ever appear in a log line. */
const issued = new Set<string>([secret]);
const remember = <T extends string>(token: T): T => {
  issued.add(token);
  return token;
};

interface Account {
  userId: number;
  deviceId: number;
  deviceToken: string;
}

describe('authorization matrix', () => {
  const logs: string[] = [];
  const bodies: string[] = [];
  let t: TestHost;
  let alice: Account;
  let alice2: Account;
  let bob: Account;
  let aliceRoom: string;
  let aliceProject: number;
  let bobProject: number;
  let jwt: string;
  const bad: Record<string, string> = {};

  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${t.base}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 400) bodies.push(text);
    return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };

  /** A JWT of a fresh login link (no device data in the verify). */
  const loginJwt = async (email: string): Promise<string> => {
    await call('POST', '/auth/magic-link', undefined, { email });
    const pending = (await t.admin('GET', '/pending-links')).body as {
      links: Array<{ email: string; link: string }>;
    };
    const link = pending.links.findLast((l) => l.email === email);
    if (!link) throw new Error(`no link for ${email}`);
    remember(new URL(link.link).searchParams.get('token') ?? '');
    const res = await fetch(link.link);
    return remember(((await res.json()) as { jwt: string }).jwt);
  };

  beforeAll(async () => {
    t = await startTestHost({
      ui: false,
      logs,
      auth: [`AUTH_SECRET=${secret}`, 'DEFAULT_TIER=pro'],
      failureLimit: { points: 10_000, seconds: 60 },
    });
    remember(t.host.adminToken);
    const signIn = async (email: string, name: string): Promise<Account> => {
      const account = await t.signIn(email, name);
      remember(account.deviceToken);
      return account;
    };
    alice = await signIn('alice@example.com', 'alice-laptop');
    alice2 = await signIn('alice@example.com', 'alice-phone');
    bob = await signIn('bob@example.com', 'bob-laptop');
    const project = await registerProject(t.base, alice.deviceToken, 'alice-notes');
    aliceRoom = project.roomId;
    aliceProject = project.id;
    bobProject = (await registerProject(t.base, bob.deviceToken, 'bob-notes')).id;
    jwt = await loginJwt('alice@example.com');
    expect(
      (await call('DELETE', `/auth/device/${alice2.deviceId}`, alice.deviceToken)).status,
    ).toBe(204);
    const claims = { userId: alice.userId, deviceId: alice.deviceId, issuedAt: 1_700_000_000 };
    Object.assign(bad, {
      'revoked device': alice2.deviceToken,
      'another secret': remember(signDeviceToken(claims, 'another-secret', 'hmac-sha256')),
      'djb2 while hmac is configured': remember(signDeviceToken(claims, secret, 'djb2')),
      'a JWT as device token': jwt,
      'an expired JWT': remember(
        await signLoginJwt(alice.userId, secret, Date.now() - 16 * 60_000),
      ),
      'a JWT of another secret': remember(
        await signLoginJwt(alice.userId, 'another-secret', Date.now()),
      ),
      'the admin token': t.host.adminToken,
      'the shared secret': secret,
    });
  });

  afterAll(async () => {
    await t?.close();
  });

  const deviceEndpoints = () => [
    ['GET', '/auth/device'],
    ['GET', '/auth/devices'],
    ['DELETE', `/auth/device/${alice.deviceId}`],
    ['POST', '/auth/project'],
    ['GET', '/auth/projects'],
    ['DELETE', `/auth/project/${aliceProject}`],
    ['GET', '/auth/subscription'],
  ];

  it('refuses every wrong token on every device-token endpoint with 401, and changes nothing', async () => {
    for (const [kind, token] of Object.entries(bad)) {
      for (const [method, path] of deviceEndpoints()) {
        const res = await call(
          method as string,
          path as string,
          token,
          method === 'POST' ? { projectKey: 'intruder', name: 'x' } : undefined,
        );
        expect(res.status, `${kind}: ${method} ${path} → ${res.text}`).toBe(401);
        expect(res.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
    }
    const mine = (await call('GET', '/auth/devices', alice.deviceToken)).json() as {
      devices: Array<{ id: number }>;
    };
    expect(mine.devices.map((d) => d.id)).toEqual([alice.deviceId]);
    const projects = (await call('GET', '/auth/projects', alice.deviceToken)).json() as {
      projects: Array<{ projectKey: string }>;
    };
    expect(projects.projects.map((p) => p.projectKey)).toEqual(['alice-notes']);
  });

  it("answers 404 for another user's device and project ids, and leaves them in place", async () => {
    expect((await call('DELETE', `/auth/device/${alice.deviceId}`, bob.deviceToken)).status).toBe(
      404,
    );
    expect((await call('DELETE', `/auth/project/${aliceProject}`, bob.deviceToken)).status).toBe(
      404,
    );
    expect((await call('DELETE', `/auth/project/${bobProject}`, alice.deviceToken)).status).toBe(
      404,
    );
    expect((await call('DELETE', `/auth/device/${bob.deviceId}`, alice.deviceToken)).status).toBe(
      404,
    );
    const bobs = (await call('GET', '/auth/devices', bob.deviceToken)).json() as {
      devices: Array<{ userId: number }>;
    };
    expect(bobs.devices.every((d) => d.userId === bob.userId)).toBe(true);
    expect((await call('GET', '/auth/device', alice.deviceToken)).status).toBe(200);
    expect((await call('GET', '/auth/device', bob.deviceToken)).status).toBe(200);
  });

  it('registers a device only with a valid, unexpired JWT of this secret', async () => {
    const input = { deviceName: 'intruder', platform: 'linux' };
    const refused = [
      alice.deviceToken,
      bad['an expired JWT'],
      bad['a JWT of another secret'],
      bad['the admin token'],
      bad['another secret'],
    ];
    for (const token of refused) {
      const header = await call('POST', '/auth/devices', token, input);
      expect(header.status, header.text).toBe(401);
      const inBody = await call('POST', '/auth/devices', undefined, { ...input, jwt: token });
      expect(inBody.status, inBody.text).toBe(401);
    }
    const ok = await call('POST', '/auth/devices', jwt, { deviceName: 'tablet', platform: 'ios' });
    expect(ok.status).toBe(201);
    remember((ok.json() as { deviceToken: string }).deviceToken);
  });

  it('refuses every wrong token, device and room at the relay with auth_failed and 4001', async () => {
    const attempts: Array<[string, string, string | number, string]> = [
      ...Object.entries(bad).map(
        ([kind, token]) =>
          [kind, aliceRoom, alice.deviceId, token] as [string, string, number, string],
      ),
      ["another user's room", aliceRoom, bob.deviceId, bob.deviceToken],
      ["another device's id", aliceRoom, alice2.deviceId, alice.deviceToken],
      [
        'a room signed with another secret',
        createRoomId(alice.userId, 'another-secret'),
        alice.deviceId,
        alice.deviceToken,
      ],
    ];
    for (const [kind, room, device, token] of attempts) {
      const client = new RelayClient(t.relayUrl);
      const answer = await client.join(room, device, token);
      expect(answer, kind).toMatchObject({ type: 'error', code: 'auth_failed' });
      expect((await client.waitClosed()).code, kind).toBe(4001);
    }
    const good = new RelayClient(t.relayUrl);
    expect(await good.join(aliceRoom, alice.deviceId, alice.deviceToken)).toMatchObject({
      type: 'joined',
    });
    await good.close();
  });

  it('refuses device tokens, JWTs and the secret on every admin endpoint', async () => {
    const adminCalls: Array<[string, string, unknown?]> = [
      ['GET', '/overview'],
      ['GET', '/users'],
      ['POST', '/users', { email: 'intruder@example.com' }],
      ['PUT', `/users/${alice.userId}/subscription`, { tier: 'team' }],
      ['DELETE', `/users/${alice.userId}`],
      ['GET', '/devices'],
      ['DELETE', `/devices/${alice.deviceId}`],
      ['GET', '/projects'],
      ['DELETE', `/projects/${aliceProject}`],
      ['GET', '/pending-links'],
      ['GET', '/relay'],
      ['GET', '/storage'],
      ['GET', '/storage/names?room=r&doc=folder'],
      ['GET', '/connection'],
    ];
    const admin = t.host.adminToken;
    const wrong = [
      alice.deviceToken,
      jwt,
      secret,
      `${admin.slice(0, -1)}${admin.endsWith('a') ? 'b' : 'a'}`,
      '',
    ];
    for (const token of wrong) {
      for (const [method, path, body] of adminCalls) {
        const res = await t.admin(method, path, body, token);
        expect(res.status, `${method} ${path}`).toBe(401);
      }
    }
    expect((await call('GET', '/auth/device', alice.deviceToken)).status).toBe(200);
  });

  it('never shows a token or secret in the admin API, in error messages or in the logs', async () => {
    const overview = await t.admin('GET', '/overview');
    const { pending: _links, ...rest } = overview.body as { pending: unknown };
    for (const path of ['/users', '/devices', '/projects', '/relay', '/connection'])
      bodies.push(JSON.stringify((await t.admin('GET', path)).body));
    bodies.push(JSON.stringify(rest));
    const deviceAndAdminSecrets = [...issued].filter((s) => !/^[0-9a-f]{64}$/.test(s));
    for (const value of deviceAndAdminSecrets) {
      for (const body of bodies) expect(body.includes(value), `${value} in ${body}`).toBe(false);
    }
    expect(logs.length).toBeGreaterThan(0);
    const all = logs.join('\n');
    for (const value of issued) {
      if (value === '') continue;
      expect(all.includes(value), `a token or secret was logged: ${value.slice(0, 12)}…`).toBe(
        false,
      );
    }
  });
});
