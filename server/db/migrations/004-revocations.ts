import type { ColumnDefinitionBuilder, Kysely } from 'kysely';
import type { DbDriver } from '../../config/auth-config.ts';
import { columnTypes } from './001-initial.ts';

/**
 * The `revocations` table: one row per deleted device, in the order of deletion. Its `id` is the
 * sequence number a relay running as its own process follows ("everything since N"), so that a
 * relay that was cut off from the auth service catches up without missing one. `revokedAt` is
 * the Unix second of the deletion: tokens of the device issued up to then are refused. No
 * foreign key: the device and often its user are gone when the row is read.
 */
export async function up(db: Kysely<unknown>, driver: DbDriver): Promise<void> {
  const { idType } = columnTypes(driver);
  const id = (col: ColumnDefinitionBuilder) =>
    driver === 'postgres' ? col.primaryKey() : col.primaryKey().autoIncrement();
  await db.schema
    .createTable('revocations')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('deviceId', 'integer', (col) => col.notNull())
    .addColumn('userId', 'integer', (col) => col.notNull())
    .addColumn('revokedAt', 'bigint', (col) => col.notNull())
    .execute();
}
