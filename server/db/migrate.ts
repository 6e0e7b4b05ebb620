import { type Kysely, sql } from 'kysely';
import type { DbDriver } from '../config/auth-config.ts';
import type { Db } from './connect.ts';
import * as initial from './migrations/001-initial.ts';
import { columnTypes } from './migrations/001-initial.ts';
import * as pairings from './migrations/002-pairings.ts';
import * as exactCollation from './migrations/003-exact-collation.ts';
import * as revocations from './migrations/004-revocations.ts';
import * as projectMembers from './migrations/005-project-members.ts';

interface Migration {
  version: number;
  name: string;
  up(db: Kysely<unknown>, driver: DbDriver): Promise<void>;
}

/**
 * Versioned schema changes, applied in order on start. A release that changes the schema
 * appends a migration here; existing databases are moved forward, never recreated.
 */
export const migrations: readonly Migration[] = [
  { version: 1, name: 'initial', up: initial.up },
  { version: 2, name: 'pairings', up: pairings.up },
  { version: 3, name: 'exact-collation', up: exactCollation.up },
  { version: 4, name: 'revocations', up: revocations.up },
  { version: 5, name: 'project-members', up: projectMembers.up },
];

/** Creates or upgrades the schema with `list` (default: every migration); returns the versions it applied. */
export async function migrate(db: Db, list: readonly Migration[] = migrations): Promise<number[]> {
  const kysely = db.kysely as unknown as Kysely<unknown>;
  const { dateType } = columnTypes(db.driver);
  await kysely.schema
    .createTable('schemaVersion')
    .ifNotExists()
    .addColumn('version', 'integer', (col) => col.primaryKey())
    .addColumn('name', 'varchar(255)', (col) => col.notNull())
    .addColumn('appliedAt', dateType, (col) => col.notNull())
    .execute();
  const applied: number[] = [];
  for (const migration of list) {
    const done = await db.kysely
      .selectFrom('schemaVersion')
      .select('version')
      .where('version', '=', migration.version)
      .executeTakeFirst();
    if (done !== undefined) continue;
    if (db.driver === 'postgres') {
      await kysely.transaction().execute(async (trx) => {
        // Two hosts starting at once on one database: the second waits, then finds it done.
        await sql`select pg_advisory_xact_lock(8445001)`.execute(trx);
        const again = await sql<{
          n: number;
        }>`select count(*)::int as n from "schemaVersion" where "version" = ${migration.version}`.execute(
          trx,
        );
        if ((again.rows[0]?.n ?? 0) > 0) return;
        await migration.up(trx, db.driver);
        await sql`insert into "schemaVersion" ("version", "name", "appliedAt") values (${migration.version}, ${migration.name}, ${new Date()})`.execute(
          trx,
        );
      });
    } else {
      await migration.up(kysely, db.driver);
      await db.kysely
        .insertInto('schemaVersion')
        .values({
          version: migration.version,
          name: migration.name,
          appliedAt: db.date(new Date()),
        })
        .execute();
    }
    applied.push(migration.version);
  }
  return applied;
}
