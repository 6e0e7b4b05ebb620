import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signLoginJwt } from '../../server/auth/jwt.ts';
import { setSubscription } from '../../server/db/users.ts';
import { sha256Hex } from '../../server/hashing.ts';
import { signDeviceToken, verifyRoomId } from '../../server/tokens.ts';
import { type AuthHarness, type SignedIn, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const targets = await dbTargets();
const roomyLimits = {
  linksPerClient: { points: 10_000, seconds: 900 },
  verifiesPerClient: { points: 10_000, seconds: 900 },
  authFailuresPerClient: { points: 10_000, seconds: 900 },
};

let emailCounter = 0;
const freshEmail = () => `user${++emailCounter}-${Date.now()}@example.com`;

async function errorCode(res: Response): Promise<string> {
  const body = (await res.json()) as { error?: { code?: string } };
  return body.error?.code ?? `(no error code, status ${res.status})`;
}

for (const target of targets) {
  const title = target.skip
    ? `auth API on ${target.name}: skipped, ${target.skip}`
    : `auth API on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let h: AuthHarness;
    beforeAll(async () => {
      h = await startAuth(target, { limits: roomyLimits });
    });
    afterAll(async () => {
      await h?.close();
    });

    const setTier = (
      userId: number,
      tier: 'free' | 'personal' | 'pro' | 'team',
      expiresAt: Date | null = null,
    ) => setSubscription(h.server.db, userId, tier, expiresAt, new Date(h.clock.now));

    describe('schema', () => {
      it('creates the seed tables with camelCase columns and a versioned schema table', async () => {
        const db = h.server.db.kysely;
        const tables = await db.introspection.getTables();
        const columns = (name: string) =>
          tables
            .find((t) => t.name === name)
            ?.columns.map((c) => c.name)
            .sort();
        expect(columns('users')).toEqual(['createdAt', 'email', 'id']);
        expect(columns('devices')).toEqual([
          'createdAt',
          'deviceName',
          'id',
          'lastSeen',
          'platform',
          'token',
          'userId',
        ]);
        expect(columns('magic_links')).toEqual([
          'createdAt',
          'email',
          'expiresAt',
          'id',
          'token',
          'used',
        ]);
        expect(columns('projects')).toEqual([
          'createdAt',
          'id',
          'name',
          'projectKey',
          'roomId',
          'userId',
        ]);
        expect(columns('subscriptions')).toEqual([
          'createdAt',
          'expiresAt',
          'id',
          'tier',
          'userId',
        ]);
        const versions = await db.selectFrom('schemaVersion').select('version').execute();
        expect(versions.map((v) => v.version)).toEqual([1]);
      });

      it('stores SHA-256 digests of device and link tokens, never the tokens', async () => {
        const email = freshEmail();
        const me = await h.signIn(email);
        const link = await h.linkToken(email);
        const db = h.server.db.kysely;
        const device = await db
          .selectFrom('devices')
          .select('token')
          .where('id', '=', me.device.id)
          .executeTakeFirstOrThrow();
        expect(device.token).toBe(sha256Hex(me.deviceToken));
        const links = await db
          .selectFrom('magic_links')
          .select('token')
          .where('email', '=', email)
          .execute();
        expect(links.map((l) => l.token)).toEqual([sha256Hex(link)]);
      });

      it('deletes devices, projects and the subscription with their user', async () => {
        const me = await h.signIn(freshEmail());
        await setTier(me.user.id, 'pro');
        await h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey: 'k', name: 'n' },
        });
        const db = h.server.db.kysely;
        await db.deleteFrom('users').where('id', '=', me.user.id).execute();
        for (const table of ['devices', 'projects', 'subscriptions'] as const) {
          const left = await db
            .selectFrom(table)
            .select('id')
            .where('userId', '=', me.user.id)
            .execute();
          expect(left, table).toEqual([]);
        }
      });
    });

    describe('login with device data on verify', () => {
      it('answers sent:true, prints the dev-mode line, and verify returns a device token, device and user', async () => {
        const email = freshEmail();
        const res = await h.request(
          'GET',
          `/auth/login?email=${encodeURIComponent(`  ${email.toUpperCase()} `)}`,
        );
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ sent: true });
        const token = await h.linkToken(email);
        expect(token).toMatch(/^[0-9a-f]{64}$/);
        const verify = await h.request(
          'GET',
          `/auth/verify?token=${token}&deviceName=Laptop&platform=linux`,
        );
        expect(verify.status).toBe(200);
        const body = (await verify.json()) as SignedIn & { device: Record<string, unknown> };
        expect(body.user.email).toBe(email);
        expect(body.device).toMatchObject({
          userId: body.user.id,
          deviceName: 'Laptop',
          platform: 'linux',
        });
        expect(Object.keys(body.device).sort()).toEqual([
          'createdAt',
          'deviceName',
          'id',
          'lastSeen',
          'platform',
          'userId',
        ]);
        expect(body.deviceToken).toMatch(
          new RegExp(`^${body.user.id}:${body.device.id}:\\d+\\.[0-9a-f]{64}$`),
        );
        const sub = await h.request('GET', '/auth/subscription', { token: body.deviceToken });
        expect(await sub.json()).toEqual({
          tier: 'free',
          effectiveTier: 'free',
          expiresAt: null,
          projectLimit: 0,
        });
      });

      it('refuses a second use of the same link with token_used', async () => {
        const email = freshEmail();
        await h.signIn(email);
        const token = await h.linkToken(email);
        const again = await h.request('GET', `/auth/verify?token=${token}&deviceName=x&platform=y`);
        expect(again.status).toBe(401);
        expect(await errorCode(again)).toBe('token_used');
      });

      it('lets exactly one of many concurrent verifies of one link succeed', async () => {
        const email = freshEmail();
        await h.request('GET', `/auth/login?email=${email}`);
        const token = await h.linkToken(email);
        const answers = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            h.request('GET', `/auth/verify?token=${token}&deviceName=d${i}&platform=p`),
          ),
        );
        const statuses = answers.map((r) => r.status).sort();
        expect(statuses.filter((s) => s === 200)).toHaveLength(1);
        expect(statuses.filter((s) => s === 401)).toHaveLength(11);
        const devices = await h.server.db.kysely
          .selectFrom('devices')
          .innerJoin('users', 'users.id', 'devices.userId')
          .select('devices.id')
          .where('users.email', '=', email)
          .execute();
        expect(devices).toHaveLength(1);
      });

      it('refuses an expired link with token_expired (clock injected)', async () => {
        const email = freshEmail();
        await h.request('GET', `/auth/login?email=${email}`);
        const token = await h.linkToken(email);
        h.clock.advance(15 * 60_000 + 1_000);
        const res = await h.request('GET', `/auth/verify?token=${token}`);
        expect(res.status).toBe(401);
        expect(await errorCode(res)).toBe('token_expired');
      });

      it('refuses an unknown or malformed link token with invalid_token and a missing one with invalid_request', async () => {
        for (const token of ['0'.repeat(64), 'not-hex', "' or 1=1 --"]) {
          const res = await h.request('GET', `/auth/verify?token=${encodeURIComponent(token)}`);
          expect(res.status).toBe(401);
          expect(await errorCode(res)).toBe('invalid_token');
        }
        const missing = await h.request('GET', '/auth/verify');
        expect(missing.status).toBe(400);
        expect(await errorCode(missing)).toBe('invalid_request');
      });

      it('refuses a verify with only one of deviceName and platform, without using the link', async () => {
        const email = freshEmail();
        await h.request('GET', `/auth/login?email=${email}`);
        const token = await h.linkToken(email);
        const res = await h.request('GET', `/auth/verify?token=${token}&deviceName=only`);
        expect(res.status).toBe(400);
        expect(await errorCode(res)).toBe('invalid_request');
        const ok = await h.request('GET', `/auth/verify?token=${token}&deviceName=a&platform=b`);
        expect(ok.status).toBe(200);
      });

      it('gives a browser an HTML page with the same status', async () => {
        const email = freshEmail();
        await h.request('GET', `/auth/login?email=${email}`);
        const token = await h.linkToken(email);
        const accept = {
          accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
        };
        const ok = await h.request('GET', `/auth/verify?token=${token}&deviceName=a&platform=b`, {
          headers: accept,
        });
        expect(ok.status).toBe(200);
        expect(ok.headers.get('content-type')).toMatch(/text\/html/);
        expect(await ok.text()).toMatch(/Signed in as .*Copy/s);
        const used = await h.request('GET', `/auth/verify?token=${token}&deviceName=a&platform=b`, {
          headers: accept,
        });
        expect(used.status).toBe(401);
        expect(await used.text()).toContain('already used');
      });
    });

    describe('login with a JWT', () => {
      it('verify without device data returns a JWT that registers a device (header or body)', async () => {
        const email = freshEmail();
        const sent = await h.request('POST', '/auth/magic-link', { body: { email } });
        expect(await sent.json()).toEqual({ sent: true });
        const token = await h.linkToken(email);
        const verify = await h.request('GET', `/auth/verify?token=${token}`);
        expect(verify.status).toBe(200);
        const { jwt, user } = (await verify.json()) as {
          jwt: string;
          user: { id: number; email: string };
        };
        expect(user.email).toBe(email);
        expect(jwt.split('.')).toHaveLength(3);
        const byHeader = await h.request('POST', '/auth/devices', {
          token: jwt,
          body: { deviceName: 'Desk', platform: 'win32' },
        });
        expect(byHeader.status).toBe(201);
        const registered = (await byHeader.json()) as SignedIn;
        expect(registered.device).toMatchObject({
          userId: user.id,
          deviceName: 'Desk',
          platform: 'win32',
        });
        const byBody = await h.request('POST', '/auth/devices', {
          body: { jwt, deviceName: 'Tablet', platform: 'android' },
        });
        expect(byBody.status).toBe(201);
        const me = await h.request('GET', '/auth/device', { token: registered.deviceToken });
        expect(((await me.json()) as { user: { email: string } }).user.email).toBe(email);
      });

      it('refuses an expired JWT, a JWT signed with another secret, and a device token used as a JWT', async () => {
        const me = await h.signIn(freshEmail());
        const old = await signLoginJwt(me.user.id, h.secret, h.clock.now - 16 * 60_000);
        const foreign = await signLoginJwt(me.user.id, 'another-secret', h.clock.now);
        for (const token of [old, foreign, me.deviceToken, 'a.b.c']) {
          const res = await h.request('POST', '/auth/devices', {
            token,
            body: { deviceName: 'x', platform: 'y' },
          });
          expect(res.status).toBe(401);
          expect(await errorCode(res)).toBe('unauthorized');
        }
      });

      it('refuses a JWT used as a device token', async () => {
        const me = await h.signIn(freshEmail());
        const jwt = await signLoginJwt(me.user.id, h.secret, h.clock.now);
        const res = await h.request('GET', '/auth/device', { token: jwt });
        expect(res.status).toBe(401);
      });
    });

    describe('device tokens', () => {
      it('refuses missing, tampered, foreign-user, wrong-secret and djb2 tokens', async () => {
        const me = await h.signIn(freshEmail());
        const other = await h.signIn(freshEmail());
        const [payload, hash] = me.deviceToken.split('.') as [string, string];
        const [, deviceId, ts] = payload.split(':');
        const flipped = `${payload}.${hash.slice(0, -1)}${hash.endsWith('0') ? '1' : '0'}`;
        const otherUser = `${other.user.id}:${deviceId}:${ts}.${hash}`;
        const resigned = signDeviceToken(
          { userId: other.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
          h.secret,
          'hmac-sha256',
        );
        const wrongSecret = signDeviceToken(
          { userId: me.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
          'not-the-secret',
          'hmac-sha256',
        );
        const djb2 = signDeviceToken(
          { userId: me.user.id, deviceId: me.device.id, issuedAt: Number(ts) },
          h.secret,
          'djb2',
        );
        for (const token of [
          undefined,
          '',
          'garbage',
          flipped,
          otherUser,
          resigned,
          wrongSecret,
          djb2,
        ]) {
          const res = await h.request('GET', '/auth/device', { token });
          expect(res.status, String(token)).toBe(401);
          expect(await errorCode(res)).toBe('unauthorized');
        }
        expect((await h.request('GET', '/auth/device', { token: me.deviceToken })).status).toBe(
          200,
        );
      });

      it('lists the caller’s devices ordered by id, without tokens', async () => {
        const email = freshEmail();
        const first = await h.signIn(email, 'one', 'linux');
        const second = await h.signIn(email, 'two', 'darwin');
        await h.signIn(freshEmail(), 'stranger', 'linux');
        const res = await h.request('GET', '/auth/devices', { token: second.deviceToken });
        const { devices } = (await res.json()) as { devices: Array<Record<string, unknown>> };
        expect(devices.map((d) => d.id)).toEqual([first.device.id, second.device.id]);
        expect(JSON.stringify(devices)).not.toContain(first.deviceToken.split('.')[1]);
        expect(devices.every((d) => !('token' in d))).toBe(true);
      });

      it('shows a device added or deleted after an earlier listing at once', async () => {
        const email = freshEmail();
        const first = await h.signIn(email, 'first');
        const ids = async () =>
          (
            (await (
              await h.request('GET', '/auth/devices', { token: first.deviceToken })
            ).json()) as {
              devices: Array<{ id: number }>;
            }
          ).devices.map((d) => d.id);
        expect(await ids()).toEqual([first.device.id]);
        const second = await h.signIn(email, 'second');
        expect(await ids()).toEqual([first.device.id, second.device.id]);
        await h.request('DELETE', `/auth/device/${second.device.id}`, { token: first.deviceToken });
        expect(await ids()).toEqual([first.device.id]);
      });

      it('deletes a device, revokes its token at once and tells revocation listeners', async () => {
        const email = freshEmail();
        const keep = await h.signIn(email, 'keep');
        const drop = await h.signIn(email, 'drop');
        // Used once before, so its successful check is remembered (the caller cache).
        expect((await h.request('GET', '/auth/device', { token: drop.deviceToken })).status).toBe(
          200,
        );
        const revoked: number[] = [];
        const off = h.server.service.onDeviceRevoked((id) => revoked.push(id));
        const res = await h.request('DELETE', `/auth/device/${drop.device.id}`, {
          token: keep.deviceToken,
        });
        off();
        expect(res.status).toBe(204);
        expect(revoked).toEqual([drop.device.id]);
        expect((await h.request('GET', '/auth/device', { token: drop.deviceToken })).status).toBe(
          401,
        );
        expect((await h.request('GET', '/auth/device', { token: keep.deviceToken })).status).toBe(
          200,
        );
      });

      it('answers 404 for another user’s device and for an unknown id, 400 for a malformed id', async () => {
        const me = await h.signIn(freshEmail());
        const other = await h.signIn(freshEmail());
        for (const id of [other.device.id, 999_999]) {
          const res = await h.request('DELETE', `/auth/device/${id}`, { token: me.deviceToken });
          expect(res.status).toBe(404);
          expect(await errorCode(res)).toBe('not_found');
        }
        expect((await h.request('GET', '/auth/device', { token: other.deviceToken })).status).toBe(
          200,
        );
        const bad = await h.request('DELETE', '/auth/device/abc', { token: me.deviceToken });
        expect(bad.status).toBe(400);
      });

      it('refreshes lastSeen at most once a minute', async () => {
        const me = await h.signIn(freshEmail());
        const stored = async () =>
          (
            await h.server.db.kysely
              .selectFrom('devices')
              .select('lastSeen')
              .where('id', '=', me.device.id)
              .executeTakeFirstOrThrow()
          ).lastSeen;
        const before = new Date(await stored()).toISOString();
        h.clock.advance(30_000);
        await h.request('GET', '/auth/devices', { token: me.deviceToken });
        expect(new Date(await stored()).toISOString()).toBe(before);
        h.clock.advance(31_000);
        const res = await h.request('GET', '/auth/device', { token: me.deviceToken });
        const seen = ((await res.json()) as { device: { lastSeen: string } }).device.lastSeen;
        expect(seen).toBe(new Date(h.clock.now).toISOString());
        await expect.poll(async () => new Date(await stored()).toISOString()).toBe(seen);
      });
    });

    describe('projects and tiers', () => {
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
        expect(((await list.json()) as { projects: unknown[] }).projects).toEqual([project]);
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
          (await h.request('DELETE', `/auth/project/${project.id}`, { token: me.deviceToken }))
            .status,
        ).toBe(204);
        expect(
          (await h.request('DELETE', `/auth/project/${project.id}`, { token: me.deviceToken }))
            .status,
        ).toBe(404);
      });
    });

    describe('input', () => {
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

    it('answers the same SQL dialect-independent count of users as it created', async () => {
      const { rows } = await sql<{ n: number | string }>`select count(*) as n from users`.execute(
        h.server.db.kysely,
      );
      expect(Number(rows[0]?.n)).toBeGreaterThan(10);
    });
  });
}
