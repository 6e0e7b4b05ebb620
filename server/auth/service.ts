import type { Db } from '../db/connect.ts';
import { type Device, deviceDigest } from '../db/devices.ts';
import { consumeMagicLink, releaseMagicLink } from '../db/magic-links.ts';
import {
  memberRevocations,
  type RemovedMember,
  type RevocationEvent,
  revocationBounds,
  revocationsSince,
} from '../db/revocations.ts';
import { deleteUser, findOrCreateUser, type User } from '../db/users.ts';
import type { Logger } from '../log.ts';
import { answerRoomCheck } from '../store/room-check.ts';
import { authDatabaseRooms } from '../store/room-directory.ts';
import { verifyRelayCredential } from '../tokens.ts';
import { type Caller, createDeviceService, type DeviceInput } from './device-service.ts';
import { AppError, unavailable } from './errors.ts';
import { signLoginJwt } from './jwt.ts';
import { createLoginLinks } from './login-links.ts';
import type { Mailer } from './mail.ts';
import { createMemberService } from './member-service.ts';
import { createPairingService } from './pairing.ts';
import { createProjectService } from './project-service.ts';
import { type AuthLimits, defaultAuthLimits, Limiter } from './rate-limits.ts';
import type { AuthSettings } from './settings.ts';

/** How long the health check waits for the database to answer. */
const healthPingTimeoutMs = 2_000;

export interface AuthServiceOptions {
  db: Db;
  settings: AuthSettings;
  mailer: Mailer;
  logger: Logger;
  /** Injectable clock, ms since the epoch. */
  now?: () => number;
  limits?: Partial<AuthLimits>;
}

/** What a verified link gives: a device, a JWT, or (a pairing's link) the approved pairing. */
export type Verified =
  | { user: User; deviceToken: string; device: Device }
  | { user: User; jwt: string }
  | { user: User; device: Device; pairing: 'approved' };

export type AuthService = ReturnType<typeof createAuthService>;

/**
 * The auth service's behaviour, independent of HTTP: login links (login-links.ts), devices and
 * bearer checks (device-service.ts), pairing (pairing.ts), projects and tiers
 * (project-service.ts), composed here with users, the verify step and the relays' feed.
 */
export function createAuthService(options: AuthServiceOptions) {
  const { db, settings, mailer, logger } = options;
  const now = options.now ?? Date.now;
  const limits = { ...defaultAuthLimits, ...options.limits };
  const links = createLoginLinks({ db, settings, mailer, logger, now, limits });
  const { addDevice, notifyRevoked, ...devices } = createDeviceService({
    db,
    settings,
    logger,
    now,
    limits,
  });
  const memberRemovals = createMemberRemovals();
  const notifyMembersRemoved = memberRemovals.notify;
  const projects = createProjectService({ db, settings, logger, now, notifyMembersRemoved });

  /** The user of an e-mail, created when new (the owner rule applies). */
  const userFor = (email: string): Promise<User> =>
    findOrCreateUser(db, email, settings.defaultTier, new Date(now()), settings.ownerEmail);

  const members = createMemberService({
    db,
    secret: settings.secret,
    logger,
    now,
    subscriptionOf: projects.subscriptionOf,
    userFor,
    notifyMembersRemoved,
  });

  const pairing = createPairingService({
    db,
    logger,
    now,
    limiters: pairingLimiters(limits, logger),
    maxPending: limits.pendingPairings,
    maxPendingPerClient: limits.pendingPairingsPerClient,
    settings,
    addDevice,
    userFor,
    issueLink: links.issueLink,
    notifyRevoked,
  });

  return {
    devMode: mailer.devMode,
    /** The public base URL (AUTH_BASE_URL or the LAN address). */
    baseUrl: () => settings.baseUrl,
    /** OWNER_EMAIL; undefined: the first user is the owner. */
    ownerEmail: () => settings.ownerEmail,
    pairing,
    userFor,
    ...devices,
    ...projects,
    members,
    /** The caller's projects and those shared with it, each with its role and owner. */
    listProjects: async (caller: Caller) =>
      members.listAccessible(caller, await projects.listProjects(caller)),
    /** Calls `listener` with the memberships that ended (removed, replaced, deleted with a project or user). */
    onMembersRemoved: memberRemovals.on,
    ...linkRequests({ db, settings, logger, now, links, pairing, userFor, addDevice }),

    /**
     * Deletes a user with devices, projects and subscription, revoking each device at once.
     * Resolves with the number of devices revoked, or undefined when there is no such user.
     */
    async deleteUser(id: number): Promise<number | undefined> {
      const deleted = await deleteUser(db, id, new Date(now()));
      if (deleted === undefined) return undefined;
      for (const deviceId of deleted.deviceIds) notifyRevoked(deviceId, id);
      if (deleted.members.length > 0) notifyMembersRemoved(deleted.members);
      return deleted.deviceIds.length;
    },

    ...relayFeed(db, settings, logger, now),
  };
}

/** The listeners of ended memberships, and their notice. */
function createMemberRemovals() {
  const memberListeners = new Set<(members: readonly RemovedMember[]) => void>();
  return {
    notify(removed: readonly RemovedMember[]): void {
      for (const listener of memberListeners) listener(removed);
    },
    on(listener: (removed: readonly RemovedMember[]) => void): () => void {
      memberListeners.add(listener);
      return () => memberListeners.delete(listener);
    },
  };
}

/** The limits on pairing: creations, unknown ids polled, wrong codes per approver and address. */
function pairingLimiters(limits: AuthLimits, logger: Logger) {
  return {
    creations: new Limiter('pairings per client', limits.pairingsPerClient, logger),
    unknownIds: new Limiter(
      'unknown pairings per client',
      limits.pairPollFailuresPerClient,
      logger,
    ),
    codeFailuresPerApprover: new Limiter(
      'wrong pairing codes per approver',
      limits.pairCodeFailuresPerApprover,
      logger,
    ),
    codeFailuresPerClient: new Limiter(
      'wrong pairing codes per client',
      limits.pairCodeFailuresPerClient,
      logger,
    ),
  };
}

/** Login links: the pending ones (development mode), a request, a verify, a description. */
function linkRequests(ctx: LinkContext) {
  const { links, pairing } = ctx;
  return {
    pendingLinks: links.pendingLinks,

    /**
     * Creates and sends a login link. Answers the same whether the e-mail is known, unknown or
     * refused by the allowlist (refusals are logged, no link is created).
     */
    async requestLink(email: string, client: string): Promise<void> {
      await links.issueLink(email, client);
    },

    /**
     * Verifies a link once; with device data returns a device token, without it a JWT. The link
     * of a pairing approves that pairing for the link's address instead.
     */
    verify: (token: string, device: DeviceInput | undefined, client: string) =>
      verifyLink(ctx, token, device, client),

    /**
     * What a link is for, without using it (the confirm page): its address and, for a pairing's
     * link, the device waiting for approval. Throws as verify would for a bad link.
     */
    async describeLink(token: string, client: string) {
      const link = await links.usableLink(token, client);
      return { email: link.email, pairing: await pairing.pairingOfLink(token) };
    },
  };
}

/** What the login links' requests use. */
interface LinkContext {
  db: Db;
  settings: AuthSettings;
  logger: Logger;
  now: () => number;
  links: ReturnType<typeof createLoginLinks>;
  pairing: ReturnType<typeof createPairingService>;
  userFor(email: string): Promise<User>;
  addDevice: ReturnType<typeof createDeviceService>['addDevice'];
}

/**
 * Verifies a link once; with device data returns a device token, without it a JWT. The link
 * of a pairing approves that pairing for the link's address instead.
 */
async function verifyLink(
  ctx: LinkContext,
  token: string,
  device: DeviceInput | undefined,
  client: string,
): Promise<Verified> {
  const { db, settings, logger, now, links, pairing, userFor, addDevice } = ctx;
  const link = await links.usableLink(token, client);
  if (!(await consumeMagicLink(db, link.id)))
    throw await links.verifyFailure(
      client,
      new AppError('token_used', 'this login link was already used'),
    );
  try {
    const paired = await pairing.pairingOfLink(token);
    if (paired !== undefined) {
      const approved = await pairing.approveByLink(paired, link.email);
      links.forgetPending(token);
      return { ...approved, pairing: 'approved' };
    }
    const user = await userFor(link.email);
    if (device === undefined) {
      const jwt = await signLoginJwt(user.id, settings.secret, now());
      links.forgetPending(token);
      logger.info({ userId: user.id }, 'login verified; JWT issued');
      return { user, jwt };
    }
    const created = await addDevice(user.id, device);
    links.forgetPending(token);
    logger.info(
      { userId: user.id, deviceId: created.device.id },
      'login verified; device registered',
    );
    return { user, deviceToken: created.token, device: created.device };
  } catch (err: unknown) {
    // A verify that fails uses nothing up: the link works again.
    await releaseMagicLink(db, link.id).catch((cause: unknown) =>
      logger.warn(
        { err: cause instanceof Error ? cause.message : String(cause) },
        'a consumed login link could not be released after a failed verify',
      ),
    );
    throw err;
  }
}

/**
 * What the relays ask of the auth service (their credential, a device's digest, the rooms
 * still in use, the revocations) and its health check.
 */
function relayFeed(db: Db, settings: AuthSettings, logger: Logger, now: () => number) {
  const projectRooms = authDatabaseRooms(() => db);
  return {
    /** Whether `credential` is a relay's, made with the shared secret (the relay feed's bearer). */
    isRelayCredential(credential: string | undefined): boolean {
      return verifyRelayCredential(credential, settings.secret, Math.floor(now() / 1000));
    },

    /** The owner and stored token digest of a device, for a relay's join check; undefined when deleted or never issued. */
    relayDevice(deviceId: number): Promise<{ userId: number; tokenDigest: string } | undefined> {
      return deviceDigest(db, deviceId);
    },

    /**
     * Which of `rooms` still have a project, for a relay of its own process whose document store
     * forgets the others: the answer with the shared secret's MAC over `nonce` (store/room-check.ts).
     */
    roomCheck(nonce: string, rooms: readonly string[]) {
      return answerRoomCheck(projectRooms, settings.secret, nonce, rooms);
    },

    /** Up to `limit` device deletions after sequence number `since` (the relays' feed). */
    revocationsSince(since: number, limit: number): Promise<RevocationEvent[]> {
      return revocationsSince(db, since, limit);
    },

    /** The sequence numbers of the oldest and latest device deletion still recorded (0: none). */
    revocationBounds(): Promise<{ oldest: number; latest: number }> {
      return revocationBounds(db);
    },

    /** Every ended membership (never pruned): what a co-hosted relay applies at start. */
    memberRevocations: () => memberRevocations(db),

    /** 200 when a trivial query answers, else throws `unavailable`. */
    async health(): Promise<void> {
      try {
        await db.ping(healthPingTimeoutMs);
      } catch (err: unknown) {
        logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'health check: the database does not answer',
        );
        throw unavailable(err);
      }
    },
  };
}
