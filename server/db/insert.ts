import type { InsertQueryBuilder, InsertResult } from 'kysely';
import type { Db } from './connect.ts';
import type { Database } from './schema.ts';

/**
 * Runs an INSERT and returns the new row's id on every driver: RETURNING on SQLite and
 * PostgreSQL, the insert id of the result on MySQL/MariaDB.
 */
export async function insertReturningId<T extends keyof Database>(
  db: Db,
  query: InsertQueryBuilder<Database, T, InsertResult>,
): Promise<number> {
  if (db.driver === 'mysql') {
    const result = await query.executeTakeFirstOrThrow();
    return Number(result.insertId);
  }
  const row = (await query.returning('id' as never).executeTakeFirstOrThrow()) as unknown as {
    id: number;
  };
  return Number(row.id);
}

/** Whether an error is a unique-constraint violation, on any driver. */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code } = err as { code?: unknown };
  return (
    code === '23505' ||
    code === 'ER_DUP_ENTRY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    (typeof (err as Error).message === 'string' &&
      /UNIQUE constraint failed/.test((err as Error).message))
  );
}
