import { expect, it } from 'vitest';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { errorCode, freshEmail, roomyLimits, tierSetter } from './api-helpers.ts';

await describeEachDatabase('auth API: input', { limits: roomyLimits }, (h) => {
  const setTier = tierSetter(h);

  it('answers invalid_request naming the field for missing, empty, too long and wrongly typed fields', async () => {
    const me = await h.signIn(freshEmail());
    await setTier(me.user.id, 'pro');
    const cases: Array<[unknown, string]> = [
      [{}, 'projectKey'],
      [{ projectKey: '', name: 'n' }, 'projectKey'],
      [{ projectKey: 'k'.repeat(256), name: 'n' }, 'projectKey'],
      [{ projectKey: 'k', name: 42 }, 'name'],
      [[1, 2], 'body'],
    ];
    for (const [body, field] of cases) {
      const res = await h.request('POST', '/auth/project', { token: me.deviceToken, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('invalid_request');
      expect(error.message).toContain(field);
    }
    const platform = await h.request('POST', '/auth/magic-link', {
      body: { email: `${'a'.repeat(250)}@example.com` },
    });
    expect(platform.status).toBe(400);
    for (const email of ['', 'not-an-email', 'a@b']) {
      const res = await h.request('GET', `/auth/login?email=${encodeURIComponent(email)}`);
      expect(res.status, email).toBe(400);
    }
    expect(
      (await h.request('GET', '/auth/login?email=a@example.com&email=b@example.com')).status,
    ).toBe(400);
  });

  it('answers 400 for malformed JSON and 413 for a body over 16 KiB', async () => {
    const bad = await h.request('POST', '/auth/magic-link', { body: '{"email":' });
    expect(bad.status).toBe(400);
    expect(await errorCode(bad)).toBe('invalid_request');
    const big = await h.request('POST', '/auth/magic-link', {
      body: { email: 'a@example.com', pad: 'x'.repeat(17 * 1024) },
    });
    expect(big.status).toBe(413);
    expect(await errorCode(big)).toBe('payload_too_large');
  });

  it('answers JSON 404 for unknown routes and wrong methods, without stack traces', async () => {
    for (const [method, path] of [
      ['GET', '/nope'],
      ['PUT', '/auth/login'],
      ['GET', '/auth/project'],
    ] as const) {
      const res = await h.request(method, path);
      expect(res.status).toBe(404);
      const text = await res.text();
      expect(JSON.parse(text).error.code).toBe('not_found');
      expect(text).not.toMatch(/at .*\.ts:\d+/);
    }
  });

  it('reports health as 200 ok', async () => {
    const res = await h.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('never writes an issued token into the logs', async () => {
    const email = freshEmail();
    const me = await h.signIn(email);
    const link = await h.linkToken(email);
    const all = h.logs.join('\n');
    expect(all).not.toContain(link);
    expect(all).not.toContain(me.deviceToken);
    expect(all).not.toContain(h.secret);
  });
});
