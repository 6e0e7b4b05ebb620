import { afterEach, describe, expect, it } from 'vitest';
import { type AuthHarness, adminToken, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const [sqlite] = await dbTargets();
let h: AuthHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const start = async (options: Parameters<typeof startAuth>[1] = {}) => {
  h = await startAuth(sqlite!, options);
  return h;
};

const linkCount = (harness: AuthHarness, email: string) =>
  harness.printed.filter((l) => l.startsWith(`[dev] Magic link token for ${email}: `)).length;

describe('CORS', () => {
  it('answers preflights with 204 for any origin on the public paths, without credentials', async () => {
    const a = await start({ admin: true });
    for (const path of [
      '/health',
      '/.well-known/sync-host',
      '/auth/login',
      '/auth/pair',
      '/auth/pair/approve',
    ]) {
      const res = await fetch(`${a.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://editor.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type',
        },
      });
      expect(res.status, path).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-headers')).toMatch(/authorization/i);
      expect(res.headers.get('access-control-allow-headers')).toMatch(/content-type/i);
      expect(res.headers.get('access-control-allow-methods')).toMatch(/POST/);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
    const real = await a.request('GET', '/.well-known/sync-host', {
      headers: { origin: 'https://editor.example' },
    });
    expect(real.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('sends no CORS headers on /admin', async () => {
    const a = await start({ admin: true });
    const pre = await fetch(`${a.url}/admin/api/users`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    const get = await a.request('GET', '/admin/api/users', {
      token: adminToken,
      headers: { origin: 'https://evil.example' },
    });
    expect(get.status).toBe(200);
    expect(get.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('request bodies', () => {
  it('answers 415 unsupported_media_type for a non-JSON body and changes nothing', async () => {
    const a = await start({ admin: true });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']) {
      const res = await a.request('POST', '/auth/magic-link', {
        body: JSON.stringify({ email: 'cors@example.com' }),
        headers: { 'content-type': type },
      });
      expect(res.status, type).toBe(415);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        'unsupported_media_type',
      );
    }
    const admin = await a.request('POST', '/admin/api/users', {
      token: adminToken,
      body: JSON.stringify({ email: 'x@example.com' }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(admin.status).toBe(415);
    expect(a.printed).toEqual([]);
    const users = await a.request('GET', '/admin/api/users', { token: adminToken });
    expect(((await users.json()) as { users: unknown[] }).users).toEqual([]);
  });
});

describe('HEAD', () => {
  it('changes nothing on login and verify', async () => {
    const a = await start();
    const email = 'head@example.com';
    expect((await a.request('HEAD', `/auth/login?email=${email}`)).status).toBe(404);
    expect(linkCount(a, email)).toBe(0);

    await a.request('GET', `/auth/login?email=${email}`);
    const token = await a.linkToken(email);
    for (const accept of ['application/json', 'text/html']) {
      const head = await a.request('HEAD', `/auth/verify?token=${token}&deviceName=a&platform=b`, {
        headers: { accept },
      });
      expect(head.status).toBeLessThan(500);
    }
    const verified = await a.request('GET', `/auth/verify?token=${token}`);
    expect(verified.status).toBe(200);
    expect(await verified.json()).toHaveProperty('jwt');
  });

  it('answers HEAD on read-only paths as GET would', async () => {
    const a = await start();
    expect((await a.request('HEAD', '/health')).status).toBe(200);
    expect((await a.request('HEAD', '/.well-known/sync-host')).status).toBe(200);
  });
});

describe('the magic-link page', () => {
  it('asks for a click, then shows the command that finishes the sign-in in the CLI', async () => {
    const a = await start();
    const email = 'page@example.com';
    await a.request('GET', `/auth/login?email=${email}`);
    const token = await a.linkToken(email);
    const page = await a.request('GET', `/auth/verify?token=${token}`, {
      headers: { accept: 'text/html' },
    });
    const html = await page.text();
    expect(html).toContain('<form method="post" action="/auth/verify">');
    expect(html).toContain(`<input type="hidden" name="token" value="${token}">`);
    expect(html).toContain(email);
    // A second view: still unused.
    expect(
      (await a.request('GET', `/auth/verify?token=${token}`, { headers: { accept: 'text/html' } }))
        .status,
    ).toBe(200);

    const post = await a.request('POST', '/auth/verify', {
      body: `token=${token}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    expect(post.status).toBe(200);
    const result = await post.text();
    const command = /sync-host login --auth (\S+) --token ([\w.-]+)/.exec(result);
    expect(command?.[1]).toBe(a.url);
    const registered = await a.request('POST', '/auth/devices', {
      token: command?.[2],
      body: { deviceName: 'cli', platform: 'linux' },
    });
    expect(registered.status).toBe(201);

    const reused = await a.request('POST', '/auth/verify', {
      body: `token=${token}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    });
    expect(reused.status).toBe(401);
    expect(await reused.text()).toContain('already used');
  });
});

describe('owner and tiers', () => {
  it('makes the first user the owner on tier pro and names tier, limit and administrator in project_limit', async () => {
    const a = await start({ admin: true, conf: { DEFAULT_TIER: 'free', OWNER_EMAIL: '' } });
    const owner = await a.signIn('first@example.com');
    const other = await a.signIn('second@example.com');
    const sub = async (token: string) =>
      (await (await a.request('GET', '/auth/subscription', { token })).json()) as { tier: string };
    expect((await sub(owner.deviceToken)).tier).toBe('pro');
    expect((await sub(other.deviceToken)).tier).toBe('free');

    const refused = await a.request('POST', '/auth/project', {
      token: other.deviceToken,
      body: { projectKey: 'k', name: 'n' },
    });
    expect(refused.status).toBe(403);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('project_limit');
    expect(error.message).toMatch(/free tier allows 0 synced projects/);
    expect(error.message).toMatch(/administrator/);

    const users = (await (
      await a.request('GET', '/admin/api/users', { token: adminToken })
    ).json()) as { users: Array<{ email: string; owner: boolean }> };
    expect(users.users.map((u) => [u.email, u.owner])).toEqual([
      ['first@example.com', true],
      ['second@example.com', false],
    ]);
  });

  it('makes OWNER_EMAIL the owner instead of the first user', async () => {
    const a = await start({ admin: true, conf: { OWNER_EMAIL: 'Boss@Example.com' } });
    const first = await a.signIn('first@example.com');
    const boss = await a.signIn('boss@example.com');
    const tier = async (token: string) =>
      ((await (await a.request('GET', '/auth/subscription', { token })).json()) as { tier: string })
        .tier;
    expect(await tier(first.deviceToken)).toBe('free');
    expect(await tier(boss.deviceToken)).toBe('pro');
  });
});

describe('TRUST_PROXY', () => {
  const pair = (a: AuthHarness, forwarded: string) =>
    a.request('POST', '/auth/pair', {
      body: { deviceName: 'd', platform: 'p' },
      headers: { 'x-forwarded-for': forwarded },
    });
  const addresses = async (a: AuthHarness) =>
    (
      (await (await a.request('GET', '/admin/api/pairings', { token: adminToken })).json()) as {
        pairings: Array<{ clientAddress: string }>;
      }
    ).pairings.map((p) => p.clientAddress);

  it('takes the client address from X-Forwarded-For of a listed proxy, for logs and rate limits', async () => {
    const a = await start({
      admin: true,
      conf: { 'trust.proxy': '127.0.0.1, ::1' },
      limits: { pairingsPerClient: { points: 1, seconds: 900 } },
    });
    expect((await pair(a, '203.0.113.7')).status).toBe(201);
    expect((await pair(a, '203.0.113.8')).status).toBe(201);
    expect((await pair(a, '203.0.113.7')).status).toBe(429);
    expect(await addresses(a)).toEqual(['203.0.113.7', '203.0.113.8']);
    expect(a.logs.some((l) => l.includes('203.0.113.7'))).toBe(true);
  });

  it('ignores X-Forwarded-For from anyone not listed', async () => {
    const a = await start({
      admin: true,
      limits: { pairingsPerClient: { points: 1, seconds: 900 } },
    });
    expect((await pair(a, '203.0.113.7')).status).toBe(201);
    expect((await pair(a, '203.0.113.8')).status).toBe(429);
    const [address] = await addresses(a);
    expect(address).toMatch(/127\.0\.0\.1/);
  });
});

describe('discovery', () => {
  it('tells clients whether the host sends e-mail', async () => {
    const a = await start();
    const info = (await (await a.request('GET', '/.well-known/sync-host')).json()) as {
      smtp: boolean;
    };
    expect(info.smtp).toBe(false);
  });
});

describe('the auth URL in a browser', () => {
  it('says what the host is and how a device gets in, under the page CSP; HEAD as GET', async () => {
    const a = await start();
    const res = await a.request('GET', '/', { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    const html = await res.text();
    expect(html).toContain(`sync-host login --auth ${a.url}`);
    expect(html).toContain('sync-host pair approve');
    expect((await a.request('HEAD', '/')).status).toBe(200);
    expect((await a.request('POST', '/', { body: {} })).status).toBe(404);
  });
});
