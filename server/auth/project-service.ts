import { effectiveTier, projectLimits, type Tier } from '../../protocol/tiers.ts';
import type { Db } from '../db/connect.ts';
import { deleteProject, listProjects, type Project, registerProject } from '../db/projects.ts';
import type { RemovedMember } from '../db/revocations.ts';
import { findSubscription } from '../db/users.ts';
import type { Logger } from '../log.ts';
import { createRoomId } from '../tokens.ts';
import type { Caller } from './device-service.ts';
import { AppError, notFound } from './errors.ts';
import type { AuthSettings } from './settings.ts';

export interface SubscriptionView {
  tier: Tier;
  effectiveTier: Tier;
  expiresAt: string | null;
  projectLimit: number | null;
}

export interface ProjectServiceOptions {
  db: Db;
  settings: Pick<AuthSettings, 'secret' | 'defaultTier'>;
  logger: Logger;
  now: () => number;
  /** Tells the relays that the memberships of a deleted project ended. */
  notifyMembersRemoved: (members: readonly RemovedMember[]) => void;
}

/** A user's subscription (tier and its project limit) and synced projects. */
export function createProjectService(options: ProjectServiceOptions) {
  const { db, settings, logger, now, notifyMembersRemoved } = options;

  async function subscriptionOf(userId: number): Promise<SubscriptionView> {
    const sub = await findSubscription(db, userId);
    const tier = sub?.tier ?? settings.defaultTier;
    const expiresAt = sub?.expiresAt ?? null;
    const effective = effectiveTier(tier, expiresAt, now());
    return { tier, effectiveTier: effective, expiresAt, projectLimit: projectLimits[effective] };
  }

  return {
    async registerProject(
      caller: Caller,
      projectKey: string,
      name: string,
    ): Promise<{ created: boolean; project: Project }> {
      const { projectLimit, effectiveTier: tier } = await subscriptionOf(caller.user.id);
      const result = await registerProject(
        db,
        { userId: caller.user.id, projectKey, name },
        projectLimit,
        new Date(now()),
        () => createRoomId(caller.user.id, settings.secret),
      );
      if ('limited' in result) {
        throw new AppError(
          'project_limit',
          `the ${tier} tier allows ${projectLimit} synced project${projectLimit === 1 ? '' : 's'}; the host's administrator can raise your tier in the admin UI (Users)`,
        );
      }
      if (result.created)
        logger.info({ userId: caller.user.id, projectId: result.project.id }, 'project registered');
      return result;
    },

    listProjects: (caller: Caller) => listProjects(db, caller.user.id),

    async deleteProject(caller: Caller, id: number): Promise<void> {
      if (!(await this.removeProject(id, caller.user.id))) throw notFound('project');
      logger.info({ userId: caller.user.id, projectId: id }, 'project deleted');
    },

    /**
     * Deletes a project (`userId`: only that user's; undefined: administrator); its members'
     * relay connections to its room close. Resolves false when there was no such project.
     */
    async removeProject(id: number, userId: number | undefined): Promise<boolean> {
      const members = await deleteProject(db, id, userId, new Date(now()));
      if (members === undefined) return false;
      if (members.length > 0) notifyMembersRemoved(members);
      return true;
    },

    subscription: (caller: Caller) => subscriptionOf(caller.user.id),
    subscriptionOf,
  };
}
