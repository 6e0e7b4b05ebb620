import { type Kysely, sql } from 'kysely';
import type { DbDriver } from '../config/auth-config.ts';
import type { Db } from './connect.ts';
import * as initial from './migrations/001-initial.ts';
import { columnTypes } from './migrations/001-initial.ts';

interface Migration {
  version: number;
  name: string;
  up(db: Kysely<unknown>, driver: DbDriver): Promise<void>;
}

/**
 * Versioned schema changes, applied in order on start. A release that changes the schema
 * appends a migration here; existing databases are moved forward, never recreated.
 */
export const migrations: readonly Migration[] = [{ version: 1, name: 'initial', up: initial.up }];

/** Creates or upgrades the schema; returns the versions it applied. */
export async function migrate(db: Db): Promise<number[]> {
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
  for (const migration of migrations) {
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
