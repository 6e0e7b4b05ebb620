import { afterEach, describe, expect, it } from 'vitest';
import { findOrCreateUser } from '../../server/db/users.ts';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const [sqlite] = await dbTargets();
if (!sqlite) throw new Error('no sqlite target');

describe('signup policy and rate limits', () => {
  let h: AuthHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  const linkLines = (harness: AuthHarness, email: string) =>
    harness.printed.filter((l) => l.startsWith(`[dev] Magic link token for ${email}:`));

  it('answers the same to allowed, refused and unknown e-mails under SIGNUP=allowlist, and creates links only for allowed ones', async () => {
    h = await startAuth(sqlite, {
      conf: { SIGNUP: 'allowlist', ALLOWED_EMAILS: 'boss@corp.example, *@team.example' },
    });
    const invited = 'guest@elsewhere.example';
    await findOrCreateUser(h.server.db, invited, 'free', new Date());
    const answers: Record<string, { status: number; body: string }> = {};
    for (const email of [
      'boss@corp.example',
      'ann@team.example',
      'BOB@Team.Example',
      invited,
      'stranger@evil.example',
      'x@corp.example',
    ]) {
      const res = await h.request('GET', `/auth/login?email=${encodeURIComponent(email)}`);
      answers[email] = { status: res.status, body: await res.text() };
    }
    expect(new Set(Object.values(answers).map((a) => `${a.status} ${a.body}`))).toEqual(
      new Set(['200 {"sent":true}']),
    );
    for (const email of ['boss@corp.example', 'ann@team.example', 'bob@team.example', invited]) {
      expect(linkLines(h, email), email).toHaveLength(1);
    }
    expect(linkLines(h, 'stranger@evil.example')).toHaveLength(0);
    expect(linkLines(h, 'x@corp.example')).toHaveLength(0);
    const links = await h.server.db.kysely.selectFrom('magic_links').select('email').execute();
    expect(links.map((l) => l.email).sort()).toEqual(
      ['ann@team.example', 'bob@team.example', 'boss@corp.example', invited].sort(),
    );
    expect(h.logs.some((l) => l.includes('stranger@evil.example') && l.includes('allowlist'))).toBe(
      true,
    );
  });

  it('limits link requests to 5 per e-mail per 15 minutes with Retry-After', async () => {
    h = await startAuth(sqlite);
    for (let i = 0; i < 5; i++)
      expect((await h.request('GET', '/auth/login?email=busy@example.com')).status).toBe(200);
    const limited = await h.request('GET', '/auth/login?email=busy@example.com');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    expect(linkLines(h, 'busy@example.com')).toHaveLength(5);
    expect((await h.request('GET', '/auth/login?email=calm@example.com')).status).toBe(200);
  });

  it('limits link requests to 30 per client address per 15 minutes, known or unknown e-mails alike', async () => {
    h = await startAuth(sqlite);
    for (let i = 0; i < 30; i++)
      expect(
        (await h.request('POST', '/auth/magic-link', { body: { email: `u${i}@example.com` } }))
          .status,
      ).toBe(200);
    const limited = await h.request('POST', '/auth/magic-link', {
      body: { email: 'one-more@example.com' },
    });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).not.toBeNull();
  });

  it('rate limits guessing of link tokens and of device tokens per client, and logs it', async () => {
    h = await startAuth(sqlite, {
      limits: {
        verifiesPerClient: { points: 10, seconds: 900 },
        authFailuresPerClient: { points: 5, seconds: 900 },
      },
    });
    const guesses = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        h!.request('GET', `/auth/verify?token=${i.toString(16).padStart(64, 'a')}`),
      ),
    );
    expect(guesses.filter((r) => r.status === 401)).toHaveLength(10);
    expect(guesses.filter((r) => r.status === 429)).toHaveLength(2);
    for (let i = 0; i < 5; i++)
      expect(
        (await h.request('GET', '/auth/devices', { token: `1:1:1.${'0'.repeat(64)}` })).status,
      ).toBe(401);
    const blocked = await h.request('GET', '/auth/devices', { token: `1:1:1.${'0'.repeat(64)}` });
    expect(blocked.status).toBe(429);
    expect(
      h.logs.some(
        (l) => l.includes('auth failures per client') && l.includes('rate limit reached'),
      ),
    ).toBe(true);
    expect(h.logs.some((l) => l.includes('unknown link token'))).toBe(true);
  });

  it('gives new users DEFAULT_TIER', async () => {
    h = await startAuth(sqlite, { conf: { DEFAULT_TIER: 'pro' } });
    const me = await h.signIn('home@example.com');
    const sub = await h.request('GET', '/auth/subscription', { token: me.deviceToken });
    expect(await sub.json()).toEqual({
      tier: 'pro',
      effectiveTier: 'pro',
      expiresAt: null,
      projectLimit: null,
    });
  });

  it('accepts djb2 device tokens when TOKEN_SIGNATURE=djb2', async () => {
    h = await startAuth(sqlite, { conf: { TOKEN_SIGNATURE: 'djb2' } });
    const me = await h.signIn('old-client@example.com');
    expect(me.deviceToken).toMatch(/^\d+:\d+:\d+\.[0-9a-f]{8}$/);
    expect((await h.request('GET', '/auth/device', { token: me.deviceToken })).status).toBe(200);
  });
});
