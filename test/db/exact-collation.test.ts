import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../server/db/connect.ts';
import { migrate, migrations } from '../../server/db/migrate.ts';
import { exactColumns } from '../../server/db/migrations/003-exact-collation.ts';
import { listProjects, registerProject } from '../../server/db/projects.ts';
import { findOrCreateUser } from '../../server/db/users.ts';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { captureLogger } from '../helpers/capture.ts';
import { dbTargets } from '../helpers/databases.ts';

const targets = await dbTargets();
const keys = ['CaseKey', 'casekey', 'casekéy'];

for (const target of targets) {
  const title = target.skip
    ? `exact key comparison on ${target.name}: skipped, ${target.skip}`
    : `exact key comparison on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    let h: AuthHarness;
    beforeAll(async () => {
      h = await startAuth(target, { conf: { DEFAULT_TIER: 'pro' } });
    });
    afterAll(async () => {
      await h?.close();
    });

    it('registers CaseKey, casekey and casekéy as three projects with three rooms', async () => {
      const me = await h.signIn('keys@example.com');
      const rooms = new Set<string>();
      for (const projectKey of keys) {
        const res = await h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey, name: projectKey },
        });
        expect(res.status, projectKey).toBe(201);
        const { project } = (await res.json()) as {
          project: { projectKey: string; roomId: string };
        };
        expect(project.projectKey).toBe(projectKey);
        rooms.add(project.roomId);
      }
      expect(rooms.size).toBe(3);
      for (const projectKey of keys) {
        const again = await h.request('POST', '/auth/project', {
          token: me.deviceToken,
          body: { projectKey, name: 'again' },
        });
        expect(again.status).toBe(200);
        expect(
          ((await again.json()) as { project: { projectKey: string } }).project.projectKey,
        ).toBe(projectKey);
      }
    });

    it('makes a database created by the first schema version compare keys exactly, keeping its rows', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'synchost-collation-'));
      const fresh = await target.create(dir);
      const { logger } = captureLogger();
      const db = await openDatabase(fresh.config, { logger, sqliteEngine: fresh.sqliteEngine });
      try {
        expect(await migrate(db, migrations.slice(0, 1))).toEqual([1]);
        const user = await findOrCreateUser(db, 'old@example.com', 'pro', new Date());
        let room = 0;
        const register = (projectKey: string) =>
          registerProject(
            db,
            { userId: user.id, projectKey, name: projectKey },
            null,
            new Date(),
            () => `room-${++room}`,
          );
        const first = await register('CaseKey');
        expect('project' in first && first.created).toBe(true);
        if (db.driver === 'mysql') {
          // what the first schema did on MariaDB: another key found the first project
          const before = await register('casekey');
          expect('project' in before && before.project.projectKey).toBe('CaseKey');
        }

        const applied = await migrate(db);
        expect(applied).toContain(3);
        expect(applied).not.toContain(1);
        if (db.driver === 'mysql') {
          const { rows } = await sql<{ t: string; c: string; collation: string }>`
            select table_name as t, column_name as c, collation_name as collation
            from information_schema.columns where table_schema = database()`.execute(db.kysely);
          for (const { table, column } of exactColumns)
            expect(
              rows.find((r) => r.t === table && r.c === column)?.collation,
              `${table}.${column}`,
            ).toBe('utf8mb4_bin');
        }
        for (const projectKey of keys.slice(1)) {
          const result = await register(projectKey);
          expect('project' in result && result.created, projectKey).toBe(true);
        }
        const stored = await listProjects(db, user.id);
        expect(stored.map((p) => p.projectKey).sort()).toEqual([...keys].sort());
        expect(stored.find((p) => p.projectKey === 'CaseKey')?.roomId).toBe('room-1');
        expect(await migrate(db)).toEqual([]);
      } finally {
        await db.close();
        await fresh.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
