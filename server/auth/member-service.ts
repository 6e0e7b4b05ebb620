import type { MemberRole } from '../../protocol/room-grant.ts';
import type { Db } from '../db/connect.ts';
import {
  devicesOfUsers,
  listMembers,
  type Member,
  type ProjectAccess,
  projectAccess,
  putMember,
  removeMember,
  sharedProjects,
} from '../db/members.ts';
import { findProjectById } from '../db/projects.ts';
import type { RemovedMember } from '../db/revocations.ts';
import { findUserById, type User } from '../db/users.ts';
import type { Logger } from '../log.ts';
import { signRoomGrant } from '../tokens.ts';
import type { Caller } from './device-service.ts';
import { AppError, notFound } from './errors.ts';
import type { SubscriptionView } from './project-service.ts';

export interface MemberServiceOptions {
  db: Db;
  secret: string;
  logger: Logger;
  now: () => number;
  subscriptionOf: (userId: number) => Promise<SubscriptionView>;
  /** The user of an e-mail, created (invited) when new. */
  userFor: (email: string) => Promise<User>;
  /** Tells the relays (co-hosted, NATS) that memberships ended. */
  notifyMembersRemoved: (members: readonly RemovedMember[]) => void;
}

/** A project in `GET /auth/projects`: the record, the caller's role, its owner, a member's grant. */
export type ListedProject = ProjectAccess['project'] & {
  role: ProjectAccess['role'];
  owner: ProjectAccess['owner'];
  grant?: string;
};

/**
 * Teams: the members of a project and their roles. The owner shares (on an effective `team`
 * tier), changes roles and removes; a member lists the members and may leave. A project the
 * caller neither owns nor is a member of is `not_found`, whatever the endpoint.
 */
export function createMemberService(options: MemberServiceOptions) {
  const checks = accessChecks(options);
  return { ...memberReads(options, checks), ...memberChanges(options, checks) };
}

/** What the caller may do in a project: any access, the owner's, the team tier to share. */
function accessChecks(options: MemberServiceOptions) {
  const { db, subscriptionOf } = options;
  async function accessOf(caller: Caller, projectId: number): Promise<ProjectAccess> {
    const access = await projectAccess(db, projectId, caller.user.id);
    if (access === undefined) throw notFound('project');
    return access;
  }

  async function asOwner(caller: Caller, projectId: number): Promise<ProjectAccess> {
    const access = await accessOf(caller, projectId);
    if (access.role !== 'owner') {
      throw new AppError('forbidden', 'only the project’s owner changes its members');
    }
    return access;
  }

  async function requireTeamTier(ownerId: number): Promise<void> {
    const { effectiveTier } = await subscriptionOf(ownerId);
    if (effectiveTier !== 'team') {
      throw new AppError(
        'tier_required',
        `sharing a project needs the team tier (yours is ${effectiveTier}); the host’s administrator can change your tier in the admin UI (Users)`,
      );
    }
  }

  return { accessOf, asOwner, requireTeamTier };
}

/** The projects shared with the caller, and a project's members. */
function memberReads(options: MemberServiceOptions, checks: ReturnType<typeof accessChecks>) {
  const { db, secret } = options;
  const { accessOf } = checks;
  return {
    /** The caller's projects and those shared with it, each with role and owner. */
    async listAccessible(
      caller: Caller,
      own: ProjectAccess['project'][],
    ): Promise<ListedProject[]> {
      const owner = { userId: caller.user.id, email: caller.user.email };
      const shared = await sharedProjects(db, caller.user.id);
      return [
        ...own.map((project) => ({ ...project, role: 'owner' as const, owner })),
        ...shared.map((access) => ({
          ...access.project,
          role: access.role,
          owner: access.owner,
          // a member's access always has its membership id and a member role
          grant: signRoomGrant(
            secret,
            access.project.roomId,
            caller.user.id,
            access.memberId as number,
            access.role as MemberRole,
          ),
        })),
      ];
    },

    /** The owner, the members, and the devices of them all (what `history` names changes by). */
    async members(caller: Caller, projectId: number) {
      const access = await accessOf(caller, projectId);
      const members = await listMembers(db, projectId);
      const users = [access.owner.userId, ...members.map((m) => m.userId)];
      return { owner: access.owner, members, devices: await devicesOfUsers(db, users) };
    },
  };
}

/** Sharing, a member's role, and removals (by the owner, the member itself, the administrator). */
function memberChanges(options: MemberServiceOptions, checks: ReturnType<typeof accessChecks>) {
  const { db, logger, now, userFor, notifyMembersRemoved } = options;
  const { accessOf, asOwner, requireTeamTier } = checks;
  return {
    /** Shares a project with the user of `email` (invited when new) as `role`. */
    async share(
      caller: Caller,
      projectId: number,
      email: string,
      role: MemberRole,
    ): Promise<{ member: Member; created: boolean }> {
      const { project } = await asOwner(caller, projectId);
      await requireTeamTier(project.userId);
      if (email === caller.user.email) {
        throw new AppError('invalid_request', 'email is the project’s owner');
      }
      const user = await userFor(email);
      const change = await putMember(db, project, user, role, new Date(now()));
      if (change.removed !== undefined) notifyMembersRemoved([change.removed]);
      logger.info({ projectId, userId: user.id, role, created: change.created }, 'project shared');
      return change;
    },

    async setRole(caller: Caller, projectId: number, userId: number, role: MemberRole) {
      const { project } = await asOwner(caller, projectId);
      await requireTeamTier(project.userId);
      const user = (await listMembers(db, projectId)).find((m) => m.userId === userId);
      if (user === undefined) throw notFound('member');
      const found = await findUserById(db, userId);
      if (found === undefined) throw notFound('member');
      const change = await putMember(db, project, found, role, new Date(now()));
      if (change.removed !== undefined) notifyMembersRemoved([change.removed]);
      logger.info({ projectId, userId, role }, 'member role changed');
      return change.member;
    },

    /** The administrator removes a member; false when there was no such project or member. */
    async removeByAdmin(projectId: number, userId: number): Promise<boolean> {
      const project = await findProjectById(db, projectId);
      if (project === undefined) return false;
      const removed = await removeMember(db, project, userId, new Date(now()));
      if (removed === undefined) return false;
      notifyMembersRemoved([removed]);
      logger.info({ projectId, userId }, 'admin: member removed');
      return true;
    },

    /** Removes a member: the owner removes anyone, a member only itself (leaving). */
    async remove(caller: Caller, projectId: number, userId: number): Promise<void> {
      const access = await accessOf(caller, projectId);
      if (access.role !== 'owner' && userId !== caller.user.id) {
        throw new AppError('forbidden', 'only the project’s owner removes other members');
      }
      const removed = await removeMember(db, access.project, userId, new Date(now()));
      if (removed === undefined) throw notFound('member');
      notifyMembersRemoved([removed]);
      logger.info(
        { projectId, userId, by: caller.user.id },
        userId === caller.user.id ? 'member left a project' : 'member removed',
      );
    },
  };
}
