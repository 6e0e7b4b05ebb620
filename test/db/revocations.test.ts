import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startRevocationPrune } from '../../server/auth/purges.ts';
import { openDatabase } from '../../server/db/connect.ts';
import { createDevice, deleteDevice } from '../../server/db/devices.ts';
import { migrate, migrations } from '../../server/db/migrate.ts';
import { revocationsSince } from '../../server/db/revocations.ts';
import { deleteUser, findOrCreateUser, setSubscription } from '../../server/db/users.ts';
import { signRelayCredential } from '../../server/tokens.ts';
import { adminToken } from '../helpers/auth-harness.ts';
import { captureLogger } from '../helpers/capture.ts';
import { dbTargets } from '../helpers/databases.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';

interface FeedAnswer {
  /** A deleted device's has `deviceId`; an ended membership's `roomId` and `memberId`. */
  revocations: Array<{
    seq: number;
    deviceId?: number;
    roomId?: string;
    memberId?: number;
    userId: number;
    revokedAt: number;
  }>;
  next: number;
  reset: boolean;
}

for (const target of await dbTargets()) {
  const title = target.skip
    ? `the revocations migration on ${target.name}: skipped, ${target.skip}`
    : `the revocations migration on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    it('adds the table to a database of the previous schema and records deletions in order', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'synchost-revocations-'));
      const fresh = await target.create(dir);
      const { logger } = captureLogger();
      const db = await openDatabase(fresh.config, { logger, sqliteEngine: fresh.sqliteEngine });
      try {
        expect(await migrate(db, migrations.slice(0, 3))).toEqual([1, 2, 3]);
        const user = await findOrCreateUser(db, 'old@example.com', 'pro', new Date());
        const addDevice = async (name: string) => {
          const created = await createDevice(
            db,
            { userId: user.id, deviceName: name, platform: 'test' },
            new Date(),
            (id) => `token-${id}`,
            10,
          );
          if (!('device' in created)) throw new Error('device limit');
          return created.device.id;
        };
        const kept = await addDevice('before the migration');

        expect(await migrate(db)).toContain(4);
        const second = await addDevice('after');
        const third = await addDevice('third');
        const at = new Date('2026-11-23T10:00:00Z');
        expect(await deleteDevice(db, second, user.id, at)).toBe(true);
        expect(await deleteDevice(db, second, user.id, at)).toBe(false);
        expect(await deleteUser(db, user.id, new Date('2026-11-23T10:00:05Z'))).toEqual({
          deviceIds: [kept, third],
          members: [],
        });
        const events = await revocationsSince(db, 0, 100);
        expect(
          events.map((event) => ({
            deviceId: 'deviceId' in event ? event.deviceId : undefined,
            userId: event.userId,
            revokedAt: event.revokedAt,
          })),
        ).toEqual([
          { deviceId: second, userId: user.id, revokedAt: 1_795_428_000 },
          { deviceId: kept, userId: user.id, revokedAt: 1_795_428_005 },
          { deviceId: third, userId: user.id, revokedAt: 1_795_428_005 },
        ]);
        const seqs = events.map((event) => event.seq);
        expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
        expect(new Set(seqs).size).toBe(3);
        expect(await revocationsSince(db, seqs[0] ?? 0, 100)).toEqual(events.slice(1));
        expect(await migrate(db)).toEqual([]);
      } finally {
        await db.close();
        await fresh.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

await describeEachDatabase('the relay feed', { admin: true }, (h) => {
  const feed = async (query: string) => {
    const res = await h.request('GET', `/relay/revocations?${query}`, {
      token: signRelayCredential(h.secret, Math.floor(h.clock.now / 1000)),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as FeedAnswer;
  };

  it('answers a waiting relay as soon as a device is deleted, and resumes from its cursor', async () => {
    const one = await h.signIn('feed@example.com', 'one');
    const two = await h.signIn('feed@example.com', 'two');
    const start = await feed('since=0');
    const waiting = feed(`since=${start.next}&waitMs=20000`);
    const removed = await h.request('DELETE', `/auth/device/${two.device.id}`, {
      token: one.deviceToken,
    });
    expect(removed.status).toBe(204);
    const woken = await waiting;
    expect(woken.reset).toBe(false);
    expect(woken.revocations).toMatchObject([{ deviceId: two.device.id, userId: two.user.id }]);
    expect(woken.next).toBe(woken.revocations[0]?.seq);

    // A user deleted by the administrator: each of its devices, after the cursor.
    const other = await h.signIn('gone@example.com', 'a');
    const gone = await fetch(`${h.url}/admin/api/users/${other.user.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(gone.status).toBeLessThan(300);
    const after = await feed(`since=${woken.next}`);
    expect(after.revocations).toMatchObject([{ deviceId: other.device.id, userId: other.user.id }]);
    expect(await feed(`since=${after.next}`)).toEqual({
      revocations: [],
      next: after.next,
      reset: false,
    });
    // A cursor beyond the latest deletion (another database): everything again, flagged.
    const replaced = await feed(`since=${after.next + 1000}`);
    expect(replaced.reset).toBe(true);
    expect(replaced.revocations.map((r) => r.deviceId)).toEqual([two.device.id, other.device.id]);
  });

  it('prunes deletions older than 7 days but the latest, and flags a cursor older than the oldest kept', async () => {
    const day = 24 * 60 * 60_000;
    const deleteUserOf = async (email: string) => {
      const signed = await h.signIn(email, 'only');
      const res = await fetch(`${h.url}/admin/api/users/${signed.user.id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${adminToken}` },
      });
      expect(res.status).toBeLessThan(300);
      return signed.device.id;
    };
    const start = await feed('since=0');
    const first = await deleteUserOf('old-1@example.com');
    const second = await deleteUserOf('old-2@example.com');
    const old = await feed(`since=${start.next}`);
    expect(old.revocations.map((r) => r.deviceId)).toEqual([first, second]);
    const [seqFirst, seqSecond] = old.revocations.map((r) => r.seq) as [number, number];
    h.clock.advance(8 * day);
    const third = await deleteUserOf('new@example.com');
    const { logger } = captureLogger();
    const prune = startRevocationPrune({ db: h.server.db, logger, now: () => h.clock.now });
    try {
      // Every row of this database from before the 8 days goes; the latest stays.
      expect(await prune.run()).toBeGreaterThanOrEqual(2);
      const behind = await feed(`since=${seqFirst}`);
      expect(behind.reset).toBe(true);
      expect(behind.revocations.map((r) => r.deviceId)).toEqual([third]);
      // A cursor on the last pruned row missed nothing.
      const onEdge = await feed(`since=${seqSecond}`);
      expect(onEdge.reset).toBe(false);
      expect(onEdge.revocations.map((r) => r.deviceId)).toEqual([third]);
      // Later, the latest row alone is kept: a relay at it is not told to reset, nor is one
      // beyond it told anything but reset.
      h.clock.advance(8 * day);
      expect(await prune.run()).toBe(0);
      expect(await feed(`since=${onEdge.next}`)).toEqual({
        revocations: [],
        next: onEdge.next,
        reset: false,
      });
      expect((await feed(`since=${onEdge.next + 1}`)).reset).toBe(true);
    } finally {
      prune.stop();
    }
  });

  it('carries ended memberships in order with the devices, and never prunes them', async () => {
    const day = 24 * 60 * 60_000;
    const owner = await h.signIn('team-owner@example.com', 'owner');
    const member = await h.signIn('team-member@example.com', 'member');
    await setSubscription(h.server.db, owner.user.id, 'team', null, new Date(h.clock.now));
    const created = await h.request('POST', '/auth/project', {
      token: owner.deviceToken,
      body: { projectKey: 'team', name: 'team' },
    });
    const { project } = (await created.json()) as { project: { id: number; roomId: string } };
    const shared = await h.request('POST', `/auth/project/${project.id}/members`, {
      token: owner.deviceToken,
      body: { email: 'team-member@example.com', role: 'editor' },
    });
    expect(shared.status).toBe(201);
    const start = await feed('since=0');
    const cursor = start.revocations.at(-1)?.seq ?? start.next;
    const waiting = feed(`since=${cursor}&waitMs=20000`);
    const removed = await h.request(
      'DELETE',
      `/auth/project/${project.id}/members/${member.user.id}`,
      {
        token: member.deviceToken,
      },
    );
    expect(removed.status).toBe(204);
    const woken = await waiting;
    expect(woken.revocations).toEqual([
      {
        seq: woken.next,
        roomId: project.roomId,
        userId: member.user.id,
        memberId: expect.any(Number),
        revokedAt: Math.floor(h.clock.now / 1000),
      },
    ]);
    h.clock.advance(8 * day);
    const { logger } = captureLogger();
    const prune = startRevocationPrune({ db: h.server.db, logger, now: () => h.clock.now });
    try {
      await prune.run();
    } finally {
      prune.stop();
    }
    const after = await feed(`since=${cursor}`);
    expect(after.revocations.map((r) => r.roomId ?? r.deviceId)).toContain(project.roomId);
    expect(await h.server.service.memberRevocations()).toContainEqual(
      expect.objectContaining({ roomId: project.roomId, userId: member.user.id }),
    );
  });
});
