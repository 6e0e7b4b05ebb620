import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { sha256Hex } from '../../server/hashing.ts';
import { describeEachDatabase } from '../helpers/each-database.ts';
import { freshEmail, roomyLimits, tierSetter } from './api-helpers.ts';

await describeEachDatabase('auth API: schema', { limits: roomyLimits }, (h) => {
  const setTier = tierSetter(h);

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
    expect(columns('subscriptions')).toEqual(['createdAt', 'expiresAt', 'id', 'tier', 'userId']);
    expect(columns('projectMembers')).toEqual(['addedAt', 'id', 'projectId', 'role', 'userId']);
    const versions = await db.selectFrom('schemaVersion').select('version').execute();
    expect(versions.map((v) => v.version)).toEqual([1, 2, 3, 4, 5]);
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

  it('answers the same SQL dialect-independent count of users as it created', async () => {
    for (let i = 0; i < 11; i++) await h.signIn(freshEmail());
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from users`.execute(
      h.server.db.kysely,
    );
    expect(Number(rows[0]?.n)).toBeGreaterThan(10);
  });
});
