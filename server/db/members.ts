import type { MemberRole, ProjectRole } from '../../protocol/room-grant.ts';
import type { Db } from './connect.ts';
import { insertReturningId, isUniqueViolation } from './insert.ts';
import { type Project, toProject } from './projects.ts';
import { type RemovedMember, recordMemberRevocations, unixSeconds } from './revocations.ts';
import { toIso } from './schema.ts';

/** A user a project is shared with. */
export interface Member {
  userId: number;
  email: string;
  role: MemberRole;
  addedAt: string;
}

/** A project as one user may reach it: its own, or shared with it. */
export interface ProjectAccess {
  project: Project;
  role: ProjectRole;
  owner: { userId: number; email: string };
  /** The membership's row id (what its room grant names); undefined for the owner. */
  memberId?: number;
}

function toMember(row: {
  userId: number | string;
  email: string;
  role: string;
  addedAt: Date | string;
}): Member {
  return {
    userId: Number(row.userId),
    email: row.email,
    role: row.role as MemberRole,
    addedAt: toIso(row.addedAt),
  };
}

const projectWithOwner = (db: Db) =>
  db.kysely
    .selectFrom('projects')
    .innerJoin('users as owners', 'owners.id', 'projects.userId')
    .selectAll('projects')
    .select('owners.email as ownerEmail');

/**
 * Project `projectId` as `userId` may reach it (owner or member); undefined when it does not
 * exist or is neither the user's nor shared with it.
 */
export async function projectAccess(
  db: Db,
  projectId: number,
  userId: number,
): Promise<ProjectAccess | undefined> {
  const row = await projectWithOwner(db)
    .leftJoin('projectMembers', (join) =>
      join
        .onRef('projectMembers.projectId', '=', 'projects.id')
        .on('projectMembers.userId', '=', userId),
    )
    .select(['projectMembers.id as memberId', 'projectMembers.role as memberRole'])
    .where('projects.id', '=', projectId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const project = toProject(row);
  const owner = { userId: project.userId, email: row.ownerEmail };
  if (project.userId === userId) return { project, role: 'owner', owner };
  if (row.memberId === null || row.memberRole === null) return undefined;
  return { project, role: row.memberRole as MemberRole, owner, memberId: Number(row.memberId) };
}

/** The projects shared with `userId` (not those it owns), in order of project id. */
export async function sharedProjects(db: Db, userId: number): Promise<ProjectAccess[]> {
  const rows = await projectWithOwner(db)
    .innerJoin('projectMembers', 'projectMembers.projectId', 'projects.id')
    .select(['projectMembers.id as memberId', 'projectMembers.role as memberRole'])
    .where('projectMembers.userId', '=', userId)
    .orderBy('projects.id')
    .execute();
  return rows.map((row) => {
    const project = toProject(row);
    return {
      project,
      role: row.memberRole as MemberRole,
      owner: { userId: project.userId, email: row.ownerEmail },
      memberId: Number(row.memberId),
    };
  });
}

/** The members of a project, in the order they were added. */
export async function listMembers(db: Db, projectId: number): Promise<Member[]> {
  const rows = await db.kysely
    .selectFrom('projectMembers')
    .innerJoin('users', 'users.id', 'projectMembers.userId')
    .select([
      'projectMembers.userId',
      'users.email',
      'projectMembers.role',
      'projectMembers.addedAt',
    ])
    .where('projectMembers.projectId', '=', projectId)
    .orderBy('projectMembers.id')
    .execute();
  return rows.map(toMember);
}

/** What a change of membership did: the member as it is now, and the membership it ended. */
export interface MemberChange {
  member: Member;
  created: boolean;
  /** The membership this change replaced (a role change), for the relays. */
  removed?: RemovedMember;
}

/**
 * Shares `project` with `user` as `role`. Sharing again with the same role changes nothing; with
 * another role the membership is replaced (a new row id, so that a relay refuses the old grant)
 * and the old one recorded as revoked, in one transaction.
 */
export async function putMember(
  db: Db,
  project: Project,
  user: { id: number; email: string },
  role: MemberRole,
  now: Date,
): Promise<MemberChange> {
  const attempt = () =>
    db.kysely.transaction().execute(async (trx): Promise<MemberChange> => {
      const existing = await trx
        .selectFrom('projectMembers')
        .select(['id', 'role', 'addedAt'])
        .where('projectId', '=', project.id)
        .where('userId', '=', user.id)
        .executeTakeFirst();
      const member = { userId: user.id, email: user.email, role };
      if (existing !== undefined && existing.role === role) {
        return { member: { ...member, addedAt: toIso(existing.addedAt) }, created: false };
      }
      let removed: RemovedMember | undefined;
      if (existing !== undefined) {
        await trx.deleteFrom('projectMembers').where('id', '=', existing.id).execute();
        removed = { roomId: project.roomId, userId: user.id, memberId: Number(existing.id) };
        await recordMemberRevocations(trx, [removed], unixSeconds(now));
      }
      const addedAt = existing === undefined ? now : new Date(toIso(existing.addedAt));
      await insertReturningId(
        { ...db, kysely: trx },
        trx.insertInto('projectMembers').values({
          projectId: project.id,
          userId: user.id,
          role,
          addedAt: db.date(addedAt),
        }),
      );
      return {
        member: { ...member, addedAt: addedAt.toISOString() },
        created: existing === undefined,
        ...(removed && { removed }),
      };
    });
  try {
    return await attempt();
  } catch (err: unknown) {
    // Two shares of one user at once: the second finds the first's row.
    if (!isUniqueViolation(err)) throw err;
    return attempt();
  }
}

/** Removes `userId` from `project`, recording the revocation; undefined when it was no member. */
export async function removeMember(
  db: Db,
  project: Project,
  userId: number,
  now: Date,
): Promise<RemovedMember | undefined> {
  return db.kysely.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('projectMembers')
      .select('id')
      .where('projectId', '=', project.id)
      .where('userId', '=', userId)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const result = await trx
      .deleteFrom('projectMembers')
      .where('id', '=', row.id)
      .executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return undefined;
    const removed = { roomId: project.roomId, userId, memberId: Number(row.id) };
    await recordMemberRevocations(trx, [removed], unixSeconds(now));
    return removed;
  });
}

/** The devices of `userIds` (id, user, name), ordered by id. */
export async function devicesOfUsers(
  db: Db,
  userIds: readonly number[],
): Promise<Array<{ id: number; userId: number; deviceName: string }>> {
  if (userIds.length === 0) return [];
  const rows = await db.kysely
    .selectFrom('devices')
    .select(['id', 'userId', 'deviceName'])
    .where('userId', 'in', userIds)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    id: Number(row.id),
    userId: Number(row.userId),
    deviceName: row.deviceName,
  }));
}
