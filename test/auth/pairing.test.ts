import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transitionPairing } from '../../server/db/pairings.ts';
import {
  type AuthHarness,
  adminToken,
  roomyLimits,
  type SignedIn,
  startAuth,
} from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const targets = await dbTargets();
const limits = roomyLimits;

const codeShape = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

interface Started {
  pairingId: string;
  code: string;
  expiresAt: string;
  interval: number;
  approveUrl: string;
}

let counter = 0;
const freshEmail = () => `pair${++counter}-${Date.now()}@example.com`;

async function errorOf(res: Response): Promise<string> {
  const body = (await res.json()) as { error?: { code?: string } };
  return body.error?.code ?? `(none, ${res.status})`;
}

for (const target of targets) {
  const title = target.skip
    ? `pairing on ${target.name}: skipped, ${target.skip}`
    : `pairing on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let h: AuthHarness;
    let approver: SignedIn;
    beforeAll(async () => {
      h = await startAuth(target, { limits, admin: true });
      approver = await h.signIn(freshEmail(), 'desk', 'linux');
    });
    afterAll(async () => {
      await h?.close();
    });

    const start = async (body: Record<string, unknown> = {}): Promise<Started> => {
      const res = await h.request('POST', '/auth/pair', {
        body: { deviceName: 'phone', platform: 'android', ...body },
      });
      expect(res.status).toBe(201);
      return (await res.json()) as Started;
    };
    /** A poll one interval after the previous one (the injected clock moves, nothing sleeps). */
    const poll = (id: string) => {
      h.clock.advance(2_000);
      return h.request('GET', `/auth/pair/${id}`);
    };
    /** The new device accepts the account a signed-in device approved it into. */
    const accept = async (pairingId: string) => {
      const res = await h.request('POST', '/auth/pair/accept', { body: { pairingId } });
      expect(res.status).toBe(204);
    };
    const admin = (path: string, body?: unknown) =>
      h.request(body === undefined ? 'GET' : 'POST', `/admin/api${path}`, {
        token: adminToken,
        body,
      });

    it('creates a pairings table with camelCase columns', async () => {
      const tables = await h.server.db.kysely.introspection.getTables();
      const columns = tables
        .find((t) => t.name === 'pairings')
        ?.columns.map((c) => c.name)
        .sort();
      expect(columns).toEqual([
        'approvedVia',
        'approverName',
        'clientAddress',
        'code',
        'createdAt',
        'deviceId',
        'deviceName',
        'email',
        'expiresAt',
        'id',
        'linkToken',
        'pairingId',
        'platform',
        'status',
        'tokenIssuedAt',
        'userId',
      ]);
    });

    it('pairs a device approved by a signed-in device, handing out its token exactly once', async () => {
      const started = await start();
      expect(started.pairingId).toMatch(/^[0-9a-f]{64}$/);
      expect(started.code).toMatch(codeShape);
      expect(started.interval).toBe(2);
      expect(started.approveUrl).toBe(`${h.url}/admin/#pair=${started.code}`);
      expect(Date.parse(started.expiresAt)).toBe(h.clock.now + 10 * 60_000);

      const pending = await poll(started.pairingId);
      expect(pending.status).toBe(202);
      expect(await pending.json()).toEqual({ status: 'pending' });

      // Lower case and without the dash is the same code.
      const typed = started.code.replace('-', '').toLowerCase();
      const approved = await h.request('POST', '/auth/pair/approve', {
        token: approver.deviceToken,
        body: { code: typed },
      });
      expect(approved.status).toBe(200);
      const { device } = (await approved.json()) as { device: { id: number; userId: number } };
      expect(device).toMatchObject({ userId: approver.user.id, deviceName: 'phone' });

      // the new device is shown the account first, and gets its token once it accepts
      const offered = await poll(started.pairingId);
      expect(offered.status).toBe(202);
      expect(await offered.json()).toEqual({
        status: 'confirm',
        email: approver.user.email,
        approvedBy: { via: 'device', name: 'desk' },
      });
      await accept(started.pairingId);

      const got = await poll(started.pairingId);
      expect(got.status).toBe(200);
      const body = (await got.json()) as {
        status: string;
        deviceToken: string;
        device: { id: number };
        user: { email: string };
        approvedBy: { via: string; name: string };
      };
      expect(body).toMatchObject({
        status: 'approved',
        device: { id: device.id },
        user: { id: approver.user.id, email: approver.user.email },
        approvedBy: { via: 'device', name: 'desk' },
      });
      const me = await h.request('GET', '/auth/device', { token: body.deviceToken });
      expect(me.status).toBe(200);
      expect(((await me.json()) as { device: { id: number } }).device.id).toBe(device.id);

      const again = await poll(started.pairingId);
      expect(again.status).toBe(404);

      // Nothing secret is stored in clear: not the pairingId, not the device token.
      const rows = await h.server.db.kysely.selectFrom('pairings').selectAll().execute();
      const stored = JSON.stringify(rows);
      expect(stored).not.toContain(started.pairingId);
      expect(stored).not.toContain(body.deviceToken);
      expect(stored).not.toContain(body.deviceToken.split('.')[1]);
    });

    it('refuses polls faster than the interval with 429 and Retry-After', async () => {
      const started = await start();
      h.clock.advance(1_000);
      const early = await h.request('GET', `/auth/pair/${started.pairingId}`);
      expect(early.status).toBe(429);
      expect(early.headers.get('retry-after')).toBe('2');
      expect(await errorOf(early)).toBe('rate_limited');
      expect((await poll(started.pairingId)).status).toBe(202);
    });

    it('hands the token to exactly one of several concurrent polls', async () => {
      const started = await start();
      const approved = await h.request('POST', '/auth/pair/approve', {
        token: approver.deviceToken,
        body: { code: started.code },
      });
      expect(approved.status).toBe(200);
      await accept(started.pairingId);
      h.clock.advance(2_000);
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => h.request('GET', `/auth/pair/${started.pairingId}`)),
      );
      expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of answers) expect([200, 404, 429]).toContain(r.status);
    });

    it('claims an approved row once in the database, whatever the number of racers', async () => {
      const started = await start();
      const res = await h.request('POST', '/auth/pair/approve', {
        token: approver.deviceToken,
        body: { code: started.code },
      });
      expect(res.status).toBe(200);
      await accept(started.pairingId);
      const row = await h.server.db.kysely
        .selectFrom('pairings')
        .select('id')
        .where('code', '=', started.code.replace('-', ''))
        .executeTakeFirstOrThrow();
      const wins = await Promise.all(
        Array.from({ length: 5 }, () =>
          transitionPairing(h.server.db, Number(row.id), 'approved', 'claimed'),
        ),
      );
      expect(wins.filter(Boolean)).toHaveLength(1);
    });

    it('tells a denied device 403 pair_denied, and a denied code cannot be approved', async () => {
      const started = await start();
      const denied = await h.request('POST', '/auth/pair/deny', {
        token: approver.deviceToken,
        body: { code: started.code },
      });
      expect(denied.status).toBe(204);
      const polled = await poll(started.pairingId);
      expect(polled.status).toBe(403);
      expect(await errorOf(polled)).toBe('pair_denied');
      const late = await h.request('POST', '/auth/pair/approve', {
        token: approver.deviceToken,
        body: { code: started.code },
      });
      expect(late.status).toBe(404);
    });

    it('expires a pairing after 10 minutes: 401 token_expired, and its code is unknown', async () => {
      const started = await start();
      h.clock.advance(10 * 60_000);
      const polled = await h.request('GET', `/auth/pair/${started.pairingId}`);
      expect(polled.status).toBe(401);
      expect(await errorOf(polled)).toBe('token_expired');
      const late = await h.request('POST', '/auth/pair/approve', {
        token: approver.deviceToken,
        body: { code: started.code },
      });
      expect(late.status).toBe(404);
      expect(await errorOf(late)).toBe('not_found');
    });

    it('lets the administrator list, approve for a new e-mail (creating the user) and deny', async () => {
      const first = await start({ deviceName: 'tablet', platform: 'ios' });
      const second = await start();
      const listed = await admin('/pairings');
      expect(listed.status).toBe(200);
      const { pairings } = (await listed.json()) as { pairings: Array<Record<string, unknown>> };
      expect(pairings.find((p) => p.code === first.code)).toEqual({
        code: first.code,
        deviceName: 'tablet',
        platform: 'ios',
        email: null,
        clientAddress: expect.stringMatching(/127\.0\.0\.1/),
        createdAt: expect.any(String),
        expiresAt: first.expiresAt,
      });

      const email = freshEmail();
      const approved = await admin('/pairings/approve', { code: first.code, email });
      expect(approved.status).toBe(200);
      const answer = (await approved.json()) as {
        device: { userId: number };
        user: { email: string; id: number };
      };
      expect(answer.user.email).toBe(email);
      expect(answer.device.userId).toBe(answer.user.id);
      const users = (await (await admin('/users')).json()) as { users: Array<{ email: string }> };
      expect(users.users.map((u) => u.email)).toContain(email);
      const got = (await (await poll(first.pairingId)).json()) as {
        user: { email: string };
        approvedBy: unknown;
      };
      expect(got.user.email).toBe(email);
      expect(got.approvedBy).toEqual({ via: 'admin', name: null });

      expect((await admin('/pairings/deny', { code: second.code })).status).toBe(204);
      expect((await poll(second.pairingId)).status).toBe(403);
      const left = (await (await admin('/pairings')).json()) as {
        pairings: Array<{ code: string }>;
      };
      expect(left.pairings.map((p) => p.code)).not.toContain(first.code);
      expect(left.pairings.map((p) => p.code)).not.toContain(second.code);
    });

    it('asks the administrator for an e-mail when the pairing has none', async () => {
      const started = await start();
      const res = await admin('/pairings/approve', { code: started.code });
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toBe('invalid_request');
      expect((await poll(started.pairingId)).status).toBe(202);
    });

    it('approves a pairing through its magic link after the confirm click, for that address', async () => {
      const email = freshEmail();
      const started = await start({ email, deviceName: 'kiosk' });
      const token = await h.linkToken(email);
      const link = `/auth/verify?token=${token}`;

      const head = await h.request('HEAD', link, { headers: { accept: 'text/html' } });
      expect(head.status).toBe(200);
      const page = await h.request('GET', link, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('<form method="post" action="/auth/verify">');
      expect(html).toContain(started.code);
      expect(html).toContain('kiosk');
      // Neither the HEAD nor the page used the link.
      expect((await poll(started.pairingId)).status).toBe(202);

      const confirmed = await h.request('POST', '/auth/verify', {
        body: new URLSearchParams({ token }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      });
      expect(confirmed.status).toBe(200);
      expect(await confirmed.text()).toMatch(/approved/i);
      const got = (await (await poll(started.pairingId)).json()) as {
        user: { email: string };
        approvedBy: unknown;
      };
      expect(got.user.email).toBe(email);
      expect(got.approvedBy).toEqual({ via: 'link', name: email });
    });

    it('rejects malformed input with 400 and unknown codes with 404', async () => {
      for (const body of [
        {},
        { deviceName: 'x' },
        { deviceName: 'x', platform: 'y', email: 'no' },
      ]) {
        const res = await h.request('POST', '/auth/pair', { body });
        expect(res.status).toBe(400);
      }
      for (const code of ['AAAA-AAAA', 'BCDF-GHJK', '12345678']) {
        const res = await h.request('POST', '/auth/pair/approve', {
          token: approver.deviceToken,
          body: { code },
        });
        expect(res.status).toBe(404);
      }
      const unauth = await h.request('POST', '/auth/pair/approve', { body: { code: 'BCDF-GHJK' } });
      expect(unauth.status).toBe(401);
    });
  });
}
