import type { Tier } from '../../protocol/tiers.ts';
import type { Db } from '../db/connect.ts';
import { toDevice } from '../db/devices.ts';
import { toProject } from '../db/projects.ts';
import { toIso } from '../db/schema.ts';
import type { AdminDevice, AdminMember, AdminProject, AdminRoomProject } from './types.ts';

/** A user row with its subscription and counts, before the effective tier is computed. */
export interface UserSummary {
  id: number;
  email: string;
  createdAt: string;
  tier: Tier | null;
  expiresAt: string | null;
  deviceCount: number;
  projectCount: number;
}

/** Every user with subscription, device count and project count, ordered by id. */
export async function listUserSummaries(db: Db, userId?: number): Promise<UserSummary[]> {
  let query = db.kysely
    .selectFrom('users')
    .leftJoin('subscriptions', 'subscriptions.userId', 'users.id')
    .select([
      'users.id',
      'users.email',
      'users.createdAt',
      'subscriptions.tier',
      'subscriptions.expiresAt',
    ])
    .select((eb) => [
      eb
        .selectFrom('devices')
        .select((e) => e.fn.countAll<number | string | bigint>().as('n'))
        .whereRef('devices.userId', '=', 'users.id')
        .as('deviceCount'),
      eb
        .selectFrom('projects')
        .select((e) => e.fn.countAll<number | string | bigint>().as('n'))
        .whereRef('projects.userId', '=', 'users.id')
        .as('projectCount'),
    ])
    .orderBy('users.id');
  if (userId !== undefined) query = query.where('users.id', '=', userId);
  const rows = await query.execute();
  return rows.map((row) => ({
    id: Number(row.id),
    email: row.email,
    createdAt: toIso(row.createdAt),
    tier: (row.tier as Tier | null) ?? null,
    expiresAt: row.expiresAt === null || row.expiresAt === undefined ? null : toIso(row.expiresAt),
    deviceCount: Number(row.deviceCount ?? 0),
    projectCount: Number(row.projectCount ?? 0),
  }));
}

/** Every device with its owner's e-mail, ordered by id (`connected` is filled by the caller). */
export async function listDevicesWithOwner(db: Db): Promise<Array<Omit<AdminDevice, 'connected'>>> {
  const rows = await db.kysely
    .selectFrom('devices')
    .innerJoin('users', 'users.id', 'devices.userId')
    .select([
      'devices.id',
      'devices.userId',
      'users.email',
      'devices.deviceName',
      'devices.platform',
      'devices.createdAt',
      'devices.lastSeen',
    ])
    .orderBy('devices.id')
    .execute();
  return rows.map((row) => ({ ...toDevice(row), email: row.email }));
}

/** Every project's fields with its owner's e-mail; the two queries below narrow it. */
function projectsWithOwner(db: Db) {
  return db.kysely
    .selectFrom('projects')
    .innerJoin('users', 'users.id', 'projects.userId')
    .select([
      'projects.id',
      'projects.userId',
      'users.email',
      'projects.projectKey',
      'projects.name',
      'projects.roomId',
      'projects.createdAt',
    ]);
}

/** Every project with its owner's e-mail and its members, ordered by id. */
export async function listProjectsWithOwner(db: Db): Promise<AdminProject[]> {
  const rows = await projectsWithOwner(db).orderBy('projects.id').execute();
  const memberRows = await db.kysely
    .selectFrom('projectMembers')
    .innerJoin('users', 'users.id', 'projectMembers.userId')
    .select([
      'projectMembers.projectId',
      'projectMembers.userId',
      'users.email',
      'projectMembers.role',
      'projectMembers.addedAt',
    ])
    .orderBy('projectMembers.id')
    .execute();
  const members = new Map<number, AdminMember[]>();
  for (const row of memberRows) {
    const list = members.get(Number(row.projectId)) ?? [];
    list.push({
      userId: Number(row.userId),
      email: row.email,
      role: row.role as AdminMember['role'],
      addedAt: toIso(row.addedAt),
    });
    members.set(Number(row.projectId), list);
  }
  return rows.map((row) => ({
    ...toProject(row),
    email: row.email,
    members: members.get(Number(row.id)) ?? [],
  }));
}

/** Room ids per query: well below the bound-parameter limits of SQLite, PostgreSQL and MySQL. */
const roomIdsPerQuery = 500;

/** The projects of these relay room ids with their owners' e-mail, by room id (unknown ids are absent). */
export async function projectsByRoom(
  db: Db,
  roomIds: string[],
): Promise<Map<string, AdminRoomProject>> {
  const byRoom = new Map<string, AdminRoomProject>();
  for (let i = 0; i < roomIds.length; i += roomIdsPerQuery) {
    const rows = await projectsWithOwner(db)
      .where('projects.roomId', 'in', roomIds.slice(i, i + roomIdsPerQuery))
      .execute();
    for (const row of rows) {
      byRoom.set(row.roomId, {
        id: Number(row.id),
        name: row.name,
        projectKey: row.projectKey,
        email: row.email,
      });
    }
  }
  return byRoom;
}

/** The owner's user id: the user with `ownerEmail` when it is set, else the first user. */
export async function ownerId(db: Db, ownerEmail: string | undefined): Promise<number | undefined> {
  let query = db.kysely.selectFrom('users').select('id').orderBy('id').limit(1);
  if (ownerEmail !== undefined) query = query.where('email', '=', ownerEmail);
  const row = await query.executeTakeFirst();
  return row === undefined ? undefined : Number(row.id);
}
