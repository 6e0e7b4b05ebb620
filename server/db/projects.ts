import type { Db } from './connect.ts';
import { insertReturningId, isUniqueViolation } from './insert.ts';
import {
  membershipsOf,
  type RemovedMember,
  recordMemberRevocations,
  unixSeconds,
} from './revocations.ts';
import { type ProjectRow, toIso } from './schema.ts';

export interface Project {
  id: number;
  userId: number;
  projectKey: string;
  name: string;
  roomId: string;
  createdAt: string;
}

export const toProject = (row: ProjectRow): Project => ({
  id: Number(row.id),
  userId: Number(row.userId),
  projectKey: row.projectKey,
  name: row.name,
  roomId: row.roomId,
  createdAt: toIso(row.createdAt),
});

export async function findProjectByKey(
  db: Db,
  userId: number,
  projectKey: string,
): Promise<Project | undefined> {
  const row = await db.kysely
    .selectFrom('projects')
    .selectAll()
    .where('userId', '=', userId)
    .where('projectKey', '=', projectKey)
    .executeTakeFirst();
  return row && toProject(row);
}

/** A project by id, whoever owns it. */
export async function findProjectById(db: Db, id: number): Promise<Project | undefined> {
  const row = await db.kysely
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirst();
  return row && toProject(row);
}

export type RegisterResult = { created: boolean; project: Project } | { limited: true };

/**
 * Registers a project idempotently per (userId, projectKey). Within one transaction that
 * locks the user's subscription row (PostgreSQL/MySQL; SQLite serializes writers anyway) it
 * counts the user's projects against `limit` (null = unlimited), so concurrent registrations
 * of different keys cannot pass the limit together; concurrent registrations of one key
 * return one record.
 */
export async function registerProject(
  db: Db,
  input: { userId: number; projectKey: string; name: string },
  limit: number | null,
  now: Date,
  newRoomId: () => string,
): Promise<RegisterResult> {
  const existing = await findProjectByKey(db, input.userId, input.projectKey);
  if (existing) return { created: false, project: existing };
  try {
    return await db.kysely.transaction().execute(async (trx): Promise<RegisterResult> => {
      if (db.driver !== 'sqlite') {
        await trx
          .selectFrom('subscriptions')
          .select('id')
          .where('userId', '=', input.userId)
          .forUpdate()
          .execute();
      }
      const again = await trx
        .selectFrom('projects')
        .selectAll()
        .where('userId', '=', input.userId)
        .where('projectKey', '=', input.projectKey)
        .executeTakeFirst();
      if (again) return { created: false, project: toProject(again) };
      if (limit !== null) {
        const { count } = await trx
          .selectFrom('projects')
          .select((eb) => eb.fn.countAll<number | string | bigint>().as('count'))
          .where('userId', '=', input.userId)
          .executeTakeFirstOrThrow();
        if (Number(count) >= limit) return { limited: true };
      }
      const roomId = newRoomId();
      const id = await insertReturningId(
        { ...db, kysely: trx },
        trx.insertInto('projects').values({ ...input, roomId, createdAt: db.date(now) }),
      );
      return { created: true, project: { id, ...input, roomId, createdAt: now.toISOString() } };
    });
  } catch (err: unknown) {
    if (!isUniqueViolation(err)) throw err;
    const winner = await findProjectByKey(db, input.userId, input.projectKey);
    if (!winner) throw err;
    return { created: false, project: winner };
  }
}

export async function listProjects(db: Db, userId: number | undefined): Promise<Project[]> {
  let query = db.kysely.selectFrom('projects').selectAll().orderBy('id');
  if (userId !== undefined) query = query.where('userId', '=', userId);
  return (await query.execute()).map(toProject);
}

/**
 * Deletes a project; `userId` limits it to that user's projects (undefined: administrator). Its
 * memberships go with it, each recorded as revoked for the relays, in one transaction. Resolves
 * with the memberships removed, or undefined when there was no such project.
 */
export async function deleteProject(
  db: Db,
  id: number,
  userId: number | undefined,
  now: Date,
): Promise<RemovedMember[] | undefined> {
  return db.kysely.transaction().execute(async (trx) => {
    const members = await membershipsOf(trx, { projectIds: [id] });
    let query = trx.deleteFrom('projects').where('id', '=', id);
    if (userId !== undefined) query = query.where('userId', '=', userId);
    const result = await query.executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return undefined;
    await recordMemberRevocations(trx, members, unixSeconds(now));
    return members;
  });
}
