import { type Kysely, sql } from 'kysely';
import type { DbDriver } from '../../config/auth-config.ts';

/** The columns that hold keys and tokens: they must compare byte for byte. */
export const exactColumns = [
  { table: 'users', column: 'email' },
  { table: 'devices', column: 'token' },
  { table: 'magic_links', column: 'token' },
  { table: 'projects', column: 'projectKey' },
  { table: 'projects', column: 'roomId' },
] as const;

/**
 * MariaDB and MySQL compare text with the database's default collation, usually case- and
 * accent-insensitive (`utf8mb4_general_ci`): `CaseKey`, `casekey` and `casekéy` were one
 * project key. This gives the key and token columns the binary collation `utf8mb4_bin`, on new
 * databases and on ones created before. Binary is stricter, so existing unique values stay
 * unique and the change cannot fail on existing rows. SQLite (BINARY) and PostgreSQL
 * (deterministic collations) compare exactly already: nothing to do there.
 */
export async function up(db: Kysely<unknown>, driver: DbDriver): Promise<void> {
  if (driver !== 'mysql') return;
  for (const { table, column } of exactColumns) {
    await sql`alter table ${sql.table(table)} modify ${sql.ref(column)} varchar(255) character set utf8mb4 collate utf8mb4_bin not null`.execute(
      db,
    );
  }
}
