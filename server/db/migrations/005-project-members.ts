import { type ColumnDefinitionBuilder, type Kysely, sql } from 'kysely';
import type { DbDriver } from '../../config/auth-config.ts';
import { columnTypes } from './001-initial.ts';

/**
 * Teams: the `projectMembers` table (one row per user a project is shared with, `editor` or
 * `viewer`; cascades with the project and with the member's user), and two columns of
 * `revocations` so that a removed membership reaches relays the way a deleted device does:
 * `roomId` (the project's room) and `memberId` (the membership row removed; relays refuse the
 * room grants of that membership and of every older one of the same user and room). A device's
 * row leaves both null. A role change replaces the row, so its id also says which grant is current.
 */
export async function up(db: Kysely<unknown>, driver: DbDriver): Promise<void> {
  const { dateType, idType } = columnTypes(driver);
  const id = (col: ColumnDefinitionBuilder) =>
    driver === 'postgres' ? col.primaryKey() : col.primaryKey().autoIncrement();
  await db.schema
    .createTable('projectMembers')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('projectId', 'integer', (col) => col.notNull())
    .addColumn('userId', 'integer', (col) => col.notNull())
    .addColumn('role', 'varchar(16)', (col) =>
      col.notNull().check(sql`${sql.ref('role')} in ('editor', 'viewer')`),
    )
    .addColumn('addedAt', dateType, (col) => col.notNull())
    .addUniqueConstraint('projectMembersProjectIdUserIdUnique', ['projectId', 'userId'])
    .addForeignKeyConstraint('projectMembersProjectIdFk', ['projectId'], 'projects', ['id'], (cb) =>
      cb.onDelete('cascade'),
    )
    .addForeignKeyConstraint('projectMembersUserIdFk', ['userId'], 'users', ['id'], (cb) =>
      cb.onDelete('cascade'),
    )
    .execute();
  const roomType =
    driver === 'mysql'
      ? sql`varchar(255) character set utf8mb4 collate utf8mb4_bin`
      : sql`varchar(255)`;
  await db.schema.alterTable('revocations').addColumn('roomId', roomType).execute();
  await db.schema.alterTable('revocations').addColumn('memberId', 'integer').execute();
}
