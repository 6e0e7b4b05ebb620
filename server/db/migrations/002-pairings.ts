import { type ColumnDefinitionBuilder, type Kysely, sql } from 'kysely';
import type { DbDriver } from '../../config/auth-config.ts';
import { columnTypes } from './001-initial.ts';

/**
 * The `pairings` table: a device asking to join by showing a short code. `pairingId` and
 * `linkToken` hold SHA-256 digests, never the secrets; the device token is never stored (it is
 * signed again from `deviceId` and `tokenIssuedAt` when the pairing is claimed). On MariaDB and
 * MySQL the code and the digests compare byte for byte (utf8mb4_bin), as the key and token
 * columns of the other tables do.
 */
export async function up(db: Kysely<unknown>, driver: DbDriver): Promise<void> {
  const { dateType, idType } = columnTypes(driver);
  const id = (col: ColumnDefinitionBuilder) =>
    driver === 'postgres' ? col.primaryKey() : col.primaryKey().autoIncrement();
  const exact = (col: ColumnDefinitionBuilder) =>
    driver === 'mysql' ? col.modifyFront(sql`character set utf8mb4 collate utf8mb4_bin`) : col;
  await db.schema
    .createTable('pairings')
    .ifNotExists()
    .addColumn('id', idType, id)
    .addColumn('pairingId', 'varchar(64)', (col) => exact(col).notNull().unique())
    .addColumn('code', 'varchar(8)', (col) => exact(col).notNull())
    .addColumn('deviceName', 'varchar(255)', (col) => col.notNull())
    .addColumn('platform', 'varchar(50)', (col) => col.notNull())
    .addColumn('email', 'varchar(255)')
    .addColumn('clientAddress', 'varchar(64)', (col) => col.notNull())
    .addColumn('linkToken', 'varchar(64)', (col) => exact(col).unique())
    .addColumn('status', 'varchar(16)', (col) => col.notNull())
    .addColumn('userId', 'integer')
    .addColumn('deviceId', 'integer')
    .addColumn('tokenIssuedAt', 'bigint')
    .addColumn('approvedVia', 'varchar(16)')
    .addColumn('approverName', 'varchar(255)')
    .addColumn('createdAt', dateType, (col) => col.notNull())
    .addColumn('expiresAt', dateType, (col) => col.notNull())
    .addForeignKeyConstraint('pairingsUserIdFk', ['userId'], 'users', ['id'], (cb) =>
      cb.onDelete('cascade'),
    )
    .execute();
  // MySQL has no CREATE INDEX IF NOT EXISTS (MariaDB and the others do).
  const index = db.schema.createIndex('pairingsCodeIndex').on('pairings').column('code');
  await (driver === 'mysql' ? index : index.ifNotExists()).execute();
}
