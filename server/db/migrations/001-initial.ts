import { type ColumnDataType, type Expression, type Kysely, sql } from 'kysely';
import type { DbDriver } from '../../config/auth-config.ts';

/** Column types and defaults that differ per driver; everything else is the same schema. */
export function columnTypes(driver: DbDriver) {
  const dateType: ColumnDataType =
    driver === 'sqlite' ? 'text' : driver === 'postgres' ? 'timestamptz' : 'datetime(3)';
  const now: Expression<unknown> =
    driver === 'sqlite'
      ? sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`
      : driver === 'postgres'
        ? sql`now()`
        : sql`CURRENT_TIMESTAMP(3)`;
  return {
    dateType,
    now,
    idType: (driver === 'postgres' ? 'serial' : 'integer') as ColumnDataType,
  };
}

/**
 * The five tables of the first layout: camelCase columns, `magic_links`, unique constraints, and
 * foreign keys to users.id with ON DELETE CASCADE (table-level, which MySQL honours).
 */
export async function up(db: Kysely<unknown>, driver: DbDriver): Promise<void> {
  const { dateType, now, idType } = columnTypes(driver);
  const id = (col: import('kysely').ColumnDefinitionBuilder) =>
    driver === 'postgres' ? col.primaryKey() : col.primaryKey().autoIncrement();
  const cascade = (cb: import('kysely').ForeignKeyConstraintBuilder) => cb.onDelete('cascade');

  await db.schema
    .createTable('users')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('email', 'varchar(255)', (col) => col.notNull().unique())
    .addColumn('createdAt', dateType, (col) => col.notNull().defaultTo(now))
    .execute();

  await db.schema
    .createTable('devices')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('userId', 'integer', (col) => col.notNull())
    .addColumn('deviceName', 'varchar(255)', (col) => col.notNull())
    .addColumn('platform', 'varchar(50)', (col) => col.notNull())
    .addColumn('token', 'varchar(255)', (col) => col.notNull().unique())
    .addColumn('createdAt', dateType, (col) => col.notNull().defaultTo(now))
    .addColumn('lastSeen', dateType, (col) => col.notNull().defaultTo(now))
    .addForeignKeyConstraint('devicesUserIdFk', ['userId'], 'users', ['id'], cascade)
    .execute();

  await db.schema
    .createTable('magic_links')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('email', 'varchar(255)', (col) => col.notNull())
    .addColumn('token', 'varchar(255)', (col) => col.notNull().unique())
    .addColumn('expiresAt', dateType, (col) => col.notNull())
    .addColumn('used', 'boolean', (col) => col.notNull().defaultTo(sql`false`))
    .addColumn('createdAt', dateType, (col) => col.notNull().defaultTo(now))
    .execute();

  await db.schema
    .createTable('projects')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('userId', 'integer', (col) => col.notNull())
    .addColumn('projectKey', 'varchar(255)', (col) => col.notNull())
    .addColumn('name', 'varchar(255)', (col) => col.notNull())
    .addColumn('roomId', 'varchar(255)', (col) => col.notNull().unique())
    .addColumn('createdAt', dateType, (col) => col.notNull().defaultTo(now))
    .addUniqueConstraint('projectsUserIdProjectKeyUnique', ['userId', 'projectKey'])
    .addForeignKeyConstraint('projectsUserIdFk', ['userId'], 'users', ['id'], cascade)
    .execute();

  await db.schema
    .createTable('subscriptions')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('userId', 'integer', (col) => col.notNull().unique())
    .addColumn('tier', 'varchar(16)', (col) =>
      col
        .notNull()
        .defaultTo('free')
        .check(sql`${sql.ref('tier')} in ('free', 'personal', 'pro', 'team')`),
    )
    .addColumn('expiresAt', dateType)
    .addColumn('createdAt', dateType, (col) => col.notNull().defaultTo(now))
    .addForeignKeyConstraint('subscriptionsUserIdFk', ['userId'], 'users', ['id'], cascade)
    .execute();
}
