import { Router } from 'express';
import { z } from 'zod';
import { docKeySchema } from '../../protocol/relay-frames.ts';
import { effectiveTier, type Tier, tiers } from '../../protocol/tiers.ts';
import { jsonBody } from '../auth/body.ts';
import { notFound } from '../auth/errors.ts';
import { codeSchema } from '../auth/pairing-routes.ts';
import { clientOf } from '../auth/request.ts';
import { emailSchema, idSchema, parseInput } from '../auth/schemas.ts';
import type { AuthService } from '../auth/service.ts';
import type { Db } from '../db/connect.ts';
import { findUserByEmail, findUserById, setSubscription } from '../db/users.ts';
import type { Host } from '../host.ts';
import type { Logger } from '../log.ts';
import { version } from '../version.ts';
import {
  listDevicesWithOwner,
  listProjectsWithOwner,
  listUserSummaries,
  ownerId,
  projectsByRoom,
  type UserSummary,
} from './queries.ts';
import { defaultStoragePage, maxStoragePage, reportNames, storageOf } from './storage.ts';
import type {
  AdminConnection,
  AdminDevice,
  AdminOverview,
  AdminPendingLinks,
  AdminRelay,
  AdminUser,
} from './types.ts';

export interface AdminRoutesOptions {
  service: AuthService;
  db: Db;
  host: () => Host;
  logger: Logger;
  /** Tier of invited users (DEFAULT_TIER). */
  defaultTier: Tier;
  now?: () => number;
}

const inviteBody = z.object({ email: emailSchema });
const subscriptionBody = z.object({
  tier: z.enum(tiers, { error: 'must be free, personal, pro or team' }),
  expiresAt: z.iso
    .datetime({ offset: true, error: 'must be an ISO-8601 date-time or null' })
    .nullable()
    .optional()
    .transform((v) => (v === undefined || v === null ? null : new Date(v))),
});
const idParams = z.object({ id: idSchema });
const pairingCodeBody = z.object({ code: codeSchema });
const pairingApproveBody = pairingCodeBody.extend({ email: emailSchema.optional() });
const pageNumber = (max: number, fallback: number) =>
  z.coerce
    .number({ error: `must be an integer from 0 to ${max}` })
    .int({ error: `must be an integer from 0 to ${max}` })
    .min(0, { error: `must be an integer from 0 to ${max}` })
    .max(max, { error: `must be an integer from 0 to ${max}` })
    .default(fallback);
const storageQuery = z.object({
  offset: pageNumber(Number.MAX_SAFE_INTEGER, 0),
  limit: pageNumber(maxStoragePage, defaultStoragePage),
});
const overviewQuery = z.object({
  storageOffset: pageNumber(Number.MAX_SAFE_INTEGER, 0),
  storageLimit: pageNumber(maxStoragePage, defaultStoragePage),
});
const namesQuery = z.object({ room: z.string().min(1).max(200), doc: docKeySchema });

/**
 * The admin API (mounted under /admin/api behind the admin-token guard). Every answer is JSON;
 * ids are checked (404 `not_found` for an unknown id); removals answer 204.
 */
export function createAdminRouter(options: AdminRoutesOptions): Router {
  const router = Router();
  router.use(jsonBody);
  router.use((_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });
  const now = options.now ?? Date.now;
  const ctx: AdminContext = { ...options, now, views: adminViews(options, now) };
  overviewRoutes(router, ctx);
  userRoutes(router, ctx);
  deviceRoutes(router, ctx);
  projectRoutes(router, ctx);
  pairingRoutes(router, ctx);
  hostRoutes(router, ctx);

  router.use((req, res) => {
    res.status(404).json({
      error: { code: 'not_found', message: `no route ${req.method} /admin/api${req.path}` },
    });
  });
  return router;
}

/** What the admin API's route groups share: the options and the views they answer with. */
interface AdminContext extends AdminRoutesOptions {
  now: () => number;
  views: ReturnType<typeof adminViews>;
}

const userId = (params: unknown): number => parseInput(idParams, params, 'id').id;

/** What the admin API shows: users, devices, the relay, pending links, how to connect. */
function adminViews(options: AdminRoutesOptions, now: () => number) {
  const { service, db } = options;
  const toAdminUser =
    (owner: number | undefined) =>
    (u: UserSummary): AdminUser => {
      const tier = u.tier ?? options.defaultTier;
      return {
        ...u,
        tier,
        effectiveTier: effectiveTier(tier, u.expiresAt, now()),
        owner: u.id === owner,
      };
    };
  const users = async (): Promise<AdminUser[]> =>
    (await listUserSummaries(db)).map(toAdminUser(await ownerId(db, service.ownerEmail())));
  /** The co-hosted relay's counters and rooms, as the relay knows them (room ids only). */
  const relayStatus = () => {
    const host = options.host();
    if (host.relay) return { state: 'running' as const, ...host.relay.status() };
    return {
      state: host.relayPaused ? ('paused' as const) : ('absent' as const),
      rooms: 0,
      connections: 0,
      buffered: 0,
      perRoom: [],
    };
  };
  /** The relay status with each room's project and user joined from the auth database. */
  const relay = async (): Promise<AdminRelay> => {
    const status = relayStatus();
    const projects = await projectsByRoom(
      db,
      status.perRoom.map((r) => r.room),
    );
    return {
      ...status,
      perRoom: status.perRoom.map((r) => ({ ...r, project: projects.get(r.room) ?? null })),
    };
  };
  const devices = async (): Promise<AdminDevice[]> => {
    const online = new Set(relayStatus().perRoom.flatMap((r) => r.devices));
    return (await listDevicesWithOwner(db)).map((d) => ({
      ...d,
      connected: online.has(String(d.id)),
    }));
  };
  const pending = (): AdminPendingLinks => ({
    devMode: service.devMode,
    links: service.devMode
      ? service
          .pendingLinks()
          .map(({ email, link, createdAt, expiresAt }) => ({ email, link, createdAt, expiresAt }))
      : [],
  });
  const connection = (): AdminConnection => {
    const { urls, mdns, fingerprint } = options.host();
    return {
      authUrl: urls.auth ?? '',
      relayUrl: urls.relay ?? '',
      statusUrl: urls.status ?? null,
      version,
      mdns,
      fingerprint: fingerprint ?? null,
    };
  };
  return { toAdminUser, users, relayStatus, relay, devices, pending, connection };
}

function overviewRoutes(router: Router, options: AdminContext): void {
  const { service, db } = options;
  const { pending, users, devices, relay, connection } = options.views;
  router.get('/overview', async (req, res) => {
    const page = parseInput(overviewQuery, req.query, 'query');
    const body: AdminOverview = {
      pending: pending(),
      pairings: await service.pairing.pending(),
      users: await users(),
      devices: await devices(),
      projects: await listProjectsWithOwner(db),
      relay: await relay(),
      storage: await storageOf(options.host(), db, {
        offset: page.storageOffset,
        limit: page.storageLimit,
      }),
      connection: connection(),
    };
    res.json(body);
  });
}

function userRoutes(router: Router, options: AdminContext): void {
  const { service, db, logger, now } = options;
  const { users, toAdminUser } = options.views;
  router.get('/users', async (_req, res) => {
    res.json({ users: await users() });
  });

  /** Invite: creates the account (so SIGNUP=allowlist lets the address in); 200 when it exists. */
  router.post('/users', async (req, res) => {
    const { email } = parseInput(inviteBody, req.body, 'body');
    const existing = await findUserByEmail(db, email);
    const user = existing ?? (await service.userFor(email));
    if (!existing) logger.info({ userId: user.id, email }, 'admin: user invited');
    const [summary] = await listUserSummaries(db, user.id);
    if (!summary) throw notFound('user');
    const owner = await ownerId(db, service.ownerEmail());
    res.status(existing ? 200 : 201).json({ user: toAdminUser(owner)(summary) });
  });

  router.put('/users/:id/subscription', async (req, res) => {
    const id = userId(req.params);
    const input = parseInput(subscriptionBody, req.body, 'body');
    if (!(await findUserById(db, id))) throw notFound('user');
    await setSubscription(db, id, input.tier, input.expiresAt, new Date(now()));
    logger.info(
      { userId: id, tier: input.tier, expiresAt: input.expiresAt?.toISOString() ?? null },
      'admin: subscription set',
    );
    res.json({ subscription: await service.subscriptionOf(id) });
  });

  /** Deletes a user with devices, projects and subscription; the relay drops its devices. */
  router.delete('/users/:id', async (req, res) => {
    const id = userId(req.params);
    const devices = await service.deleteUser(id);
    if (devices === undefined) throw notFound('user');
    logger.info({ userId: id, devices }, 'admin: user deleted');
    res.status(204).end();
  });
}

function deviceRoutes(router: Router, options: AdminContext): void {
  const { service, logger } = options;
  const { devices } = options.views;
  router.get('/devices', async (_req, res) => {
    res.json({ devices: await devices() });
  });

  /** Revokes a device at once: its token stops working and its relay sockets close with 4003. */
  router.delete('/devices/:id', async (req, res) => {
    const id = userId(req.params);
    const owner = await service.removeDevice(id, undefined);
    if (owner === undefined) throw notFound('device');
    logger.info({ userId: owner, deviceId: id }, 'admin: device revoked');
    res.status(204).end();
  });
}

function projectRoutes(router: Router, options: AdminContext): void {
  const { service, db, logger } = options;
  router.get('/projects', async (_req, res) => {
    res.json({ projects: await listProjectsWithOwner(db) });
  });

  router.delete('/projects/:id', async (req, res) => {
    const id = userId(req.params);
    if (!(await service.removeProject(id, undefined))) throw notFound('project');
    logger.info({ projectId: id }, 'admin: project removed');
    res.status(204).end();
  });

  /** Teams: removes a member from a project; its relay connections to the room close with 4003. */
  router.delete('/projects/:id/members/:userId', async (req, res) => {
    const id = userId(req.params);
    const member = parseInput(idSchema, req.params.userId, 'userId');
    if (!(await service.members.removeByAdmin(id, member))) throw notFound('member');
    res.status(204).end();
  });
}

function pairingRoutes(router: Router, options: AdminContext): void {
  const { service } = options;
  router.get('/pairings', async (_req, res) => {
    res.json({ pairings: await service.pairing.pending() });
  });

  /** Approves a pairing for the user of `email` (created when new), or of the pairing's e-mail. */
  router.post('/pairings/approve', async (req, res) => {
    const { code, email } = parseInput(pairingApproveBody, req.body, 'body');
    res.json(await service.pairing.approveCode(code, { via: 'admin', email }, clientOf(req)));
  });

  router.post('/pairings/deny', async (req, res) => {
    const { code } = parseInput(pairingCodeBody, req.body, 'body');
    await service.pairing.denyCode(code, { via: 'admin', email: undefined }, clientOf(req));
    res.status(204).end();
  });
}

/** The co-hosted relay, the store's sizes, how devices connect, the pending links. */
function hostRoutes(router: Router, options: AdminContext): void {
  const { db } = options;
  const { relay, connection, pending } = options.views;
  router.get('/pending-links', (_req, res) => {
    res.json(pending());
  });

  router.get('/relay', async (_req, res) => {
    res.json(await relay());
  });

  /** Bytes the document store keeps per user and project: one page of the projects. */
  router.get('/storage', async (req, res) => {
    res.json(await storageOf(options.host(), db, parseInput(storageQuery, req.query, 'query')));
  });

  /** The names of one folder's latest report (the storage lists only how many). */
  router.get('/storage/names', async (req, res) => {
    const { room, doc } = parseInput(namesQuery, req.query, 'query');
    const names = await reportNames(options.host(), room, doc);
    if (names === undefined) throw notFound('folder report');
    res.json({ names });
  });

  router.get('/connection', (_req, res) => {
    res.json(connection());
  });
}
