import { effectiveTier, projectLimits, type Tier } from '../../protocol/tiers.ts';
import type { TokenSignature } from '../config/common.ts';
import type { Db } from '../db/connect.ts';
import {
  createDevice,
  type Device,
  deleteDevice,
  deviceDigest,
  deviceOwner,
  findDeviceForAuth,
  listDevices,
  touchDevice,
} from '../db/devices.ts';
import {
  consumeMagicLink,
  createMagicLink,
  findMagicLink,
  releaseMagicLink,
} from '../db/magic-links.ts';
import { deleteProject, listProjects, type Project, registerProject } from '../db/projects.ts';
import { latestRevocation, type RevocationEvent, revocationsSince } from '../db/revocations.ts';
import {
  deleteUser,
  findOrCreateUser,
  findSubscription,
  findUserByEmail,
  findUserById,
  type User,
} from '../db/users.ts';
import { randomHex, safeEqual, sha256Hex } from '../hashing.ts';
import type { Logger } from '../log.ts';
import {
  createRoomId,
  signDeviceToken,
  verifyDeviceToken,
  verifyRelayCredential,
} from '../tokens.ts';
import { AppError, notFound, unauthorized, unavailable } from './errors.ts';
import { signLoginJwt, verifyLoginJwt } from './jwt.ts';
import type { Mailer } from './mail.ts';
import { createPairingService } from './pairing.ts';
import { type AuthLimits, defaultAuthLimits, Limiter } from './rate-limits.ts';

/** Magic links are valid 15 minutes. */
export const linkLifetimeMs = 15 * 60_000;
/** lastSeen is written at most once per this interval per device, not on every request. */
export const lastSeenRefreshMs = 60_000;
/**
 * A successful bearer check is remembered this long, so a busy client costs no database read
 * and no HMAC per request. Deleting a device (user, admin, or a user's deletion) drops its
 * entries at once in this process; see docs/auth.md for several auth processes on one database.
 */
export const callerCacheMs = 10_000;
/** How long the health check waits for the database to answer. */
const healthPingTimeoutMs = 2_000;
/** Entries kept at most; the cache is emptied when it is full. */
const callerCacheEntries = 10_000;

export interface AuthSettings {
  secret: string;
  tokenSignature: TokenSignature;
  /** Public base URL; links are `<baseUrl>/auth/verify?token=<token>`. */
  baseUrl: string;
  defaultTier: Tier;
  signup: 'open' | 'allowlist';
  /** Lower-case addresses and `*@domain` patterns. */
  allowedEmails: readonly string[];
  /** Devices one user may have at most (DEVICE_LIMIT). */
  deviceLimit: number;
  /** The owner's address (OWNER_EMAIL); undefined: the first user is the owner. */
  ownerEmail?: string | undefined;
}

export interface AuthServiceOptions {
  db: Db;
  settings: AuthSettings;
  mailer: Mailer;
  logger: Logger;
  /** Injectable clock, ms since the epoch. */
  now?: () => number;
  limits?: Partial<AuthLimits>;
}

/** A link printed in development mode and shown in the admin UI until it is used or expires. */
export interface PendingLink {
  email: string;
  token: string;
  link: string;
  createdAt: string;
  expiresAt: string;
}

export interface Caller {
  user: User;
  device: Device;
}

export interface SubscriptionView {
  tier: Tier;
  effectiveTier: Tier;
  expiresAt: string | null;
  projectLimit: number | null;
}

export type DeviceInput = { deviceName: string; platform: string };

/** What a verified link gives: a device, a JWT, or (a pairing's link) the approved pairing. */
export type Verified =
  | { user: User; deviceToken: string; device: Device }
  | { user: User; jwt: string }
  | { user: User; device: Device; pairing: 'approved' };

/** Whether an e-mail is matched by ALLOWED_EMAILS (exact addresses or `*@domain`). */
export function isAllowedEmail(email: string, patterns: readonly string[]): boolean {
  const domain = email.slice(email.lastIndexOf('@') + 1);
  return patterns.some((p) => p === email || (p.startsWith('*@') && p.slice(2) === domain));
}

export type AuthService = ReturnType<typeof createAuthService>;

/** The auth service's behaviour, independent of HTTP. */
export function createAuthService(options: AuthServiceOptions) {
  const { db, settings, mailer, logger } = options;
  const now = options.now ?? Date.now;
  const limits = { ...defaultAuthLimits, ...options.limits };
  const linksPerEmail = new Limiter('links per e-mail', limits.linksPerEmail, logger);
  const linksPerClient = new Limiter('links per client', limits.linksPerClient, logger);
  const verifiesPerClient = new Limiter('verifies per client', limits.verifiesPerClient, logger);
  const authFailures = new Limiter(
    'auth failures per client',
    limits.authFailuresPerClient,
    logger,
  );
  const devicesPerJwt = new Limiter(
    'devices per login JWT',
    limits.devicesPerJwt,
    logger,
    `this sign-in code has registered ${limits.devicesPerJwt.points} devices, the most one code may; sign in again`,
  );
  const pairingLimiters = {
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
  const revokeListeners = new Set<(deviceId: number, userId: number) => void>();
  const pending = new Map<string, PendingLink>();
  const callers = new Map<string, { caller: Caller; until: number }>();
  const deviceLists = new Map<number, { devices: Device[]; until: number }>();

  async function addDevice(userId: number, input: DeviceInput) {
    const created = await createDevice(
      db,
      { userId, ...input },
      new Date(now()),
      signToken(userId),
      settings.deviceLimit,
    );
    if ('limited' in created) {
      logger.info({ userId, limit: settings.deviceLimit }, 'device refused: device limit reached');
      throw new AppError(
        'device_limit',
        `this account already has ${settings.deviceLimit} devices, the most this host allows; remove one you no longer use, or ask the host's administrator to raise DEVICE_LIMIT`,
      );
    }
    deviceLists.delete(userId);
    return created;
  }

  /** Counts a failed verify against the client address: 429 beyond the limit, else `error`. */
  async function verifyFailure(client: string, error: AppError): Promise<AppError> {
    await verifiesPerClient.consume(client);
    return error;
  }

  const signToken = (userId: number) => (deviceId: number) =>
    signDeviceToken(
      { userId, deviceId, issuedAt: Math.floor(now() / 1000) },
      settings.secret,
      settings.tokenSignature,
    );

  async function subscriptionOf(userId: number): Promise<SubscriptionView> {
    const sub = await findSubscription(db, userId);
    const tier = sub?.tier ?? settings.defaultTier;
    const expiresAt = sub?.expiresAt ?? null;
    const effective = effectiveTier(tier, expiresAt, now());
    return { tier, effectiveTier: effective, expiresAt, projectLimit: projectLimits[effective] };
  }

  /** Tells listeners (the co-hosted relay) that a device no longer exists. */
  function notifyRevoked(deviceId: number, userId: number): void {
    deviceLists.delete(userId);
    for (const [token, entry] of callers)
      if (entry.caller.device.id === deviceId) callers.delete(token);
    for (const listener of revokeListeners) listener(deviceId, userId);
  }

  /**
   * Deletes a device and revokes it at once: its token stops working and its relay connections
   * close. `userId` limits it to that user's devices (undefined: administrator). Resolves with
   * the owner, or undefined when there is no such device.
   */
  async function removeDevice(id: number, userId: number | undefined): Promise<number | undefined> {
    const owner = userId ?? (await deviceOwner(db, id));
    if (owner === undefined || !(await deleteDevice(db, id, userId, new Date(now()))))
      return undefined;
    notifyRevoked(id, owner);
    return owner;
  }

  /** Writes lastSeen when the stored value is at least lastSeenRefreshMs old. */
  function refreshLastSeen(device: Device): void {
    if (now() - Date.parse(device.lastSeen) < lastSeenRefreshMs) return;
    const seen = new Date(now());
    device.lastSeen = seen.toISOString();
    deviceLists.delete(device.userId);
    touchDevice(db, device.id, seen).catch((err: unknown) =>
      logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'lastSeen refresh failed',
      ),
    );
  }

  function prunePending(): void {
    const at = now();
    for (const [token, link] of pending)
      if (Date.parse(link.expiresAt) <= at) pending.delete(token);
  }

  /** The unused, unexpired link of a token, else the reason as an AppError; counts per client. */
  async function usableLink(token: string, client: string) {
    const link = /^[0-9a-f]{64}$/.test(token) ? await findMagicLink(db, token) : undefined;
    if (link === undefined) {
      logger.warn({ client }, 'verify with an unknown link token');
      throw await verifyFailure(
        client,
        new AppError('invalid_token', 'this login link is not valid'),
      );
    }
    if (link.used)
      throw await verifyFailure(
        client,
        new AppError('token_used', 'this login link was already used'),
      );
    if (Date.parse(link.expiresAt) <= now())
      throw await verifyFailure(
        client,
        new AppError('token_expired', 'this login link has expired'),
      );
    return link;
  }

  /** The user of an e-mail, created when new (the owner rule applies). */
  const userFor = (email: string): Promise<User> =>
    findOrCreateUser(db, email, settings.defaultTier, new Date(now()), settings.ownerEmail);

  /**
   * Creates and sends (or prints) a magic link; returns its token, or undefined when the
   * allowlist refuses the address (logged, no link created).
   */
  async function issueLink(email: string, client: string): Promise<string | undefined> {
    await linksPerClient.consume(client);
    await linksPerEmail.consume(email);
    if (settings.signup === 'allowlist' && !isAllowedEmail(email, settings.allowedEmails)) {
      if ((await findUserByEmail(db, email)) === undefined) {
        logger.info({ email, client }, 'login refused: e-mail not on the allowlist');
        return undefined;
      }
    }
    const token = randomHex(32);
    const created = new Date(now());
    const expires = new Date(created.getTime() + linkLifetimeMs);
    await createMagicLink(db, email, token, created, expires);
    const link = `${settings.baseUrl}/auth/verify?token=${token}`;
    try {
      await mailer.sendLoginLink(email, token, link);
    } catch (err: unknown) {
      logger.error(
        { email, err: err instanceof Error ? err.message : String(err) },
        'login e-mail could not be sent',
      );
      throw new AppError('unavailable', 'the login e-mail could not be sent; try again later', 30);
    }
    if (mailer.devMode) {
      prunePending();
      pending.set(token, {
        email,
        token,
        link,
        createdAt: created.toISOString(),
        expiresAt: expires.toISOString(),
      });
    }
    logger.info({ email }, 'login link created');
    return token;
  }

  const pairing = createPairingService({
    db,
    logger,
    now,
    limiters: pairingLimiters,
    settings,
    addDevice,
    userFor,
    issueLink,
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

    /**
     * Creates and sends a login link. Answers the same whether the e-mail is known, unknown or
     * refused by the allowlist (refusals are logged, no link is created).
     */
    async requestLink(email: string, client: string): Promise<void> {
      await issueLink(email, client);
    },

    /**
     * Verifies a link once; with device data returns a device token, without it a JWT. The link
     * of a pairing approves that pairing for the link's address instead.
     */
    async verify(
      token: string,
      device: DeviceInput | undefined,
      client: string,
    ): Promise<Verified> {
      const link = await usableLink(token, client);
      if (!(await consumeMagicLink(db, link.id)))
        throw await verifyFailure(
          client,
          new AppError('token_used', 'this login link was already used'),
        );
      try {
        const paired = await pairing.pairingOfLink(token);
        if (paired !== undefined) {
          const approved = await pairing.approveByLink(paired, link.email);
          pending.delete(token);
          return { ...approved, pairing: 'approved' };
        }
        const user = await userFor(link.email);
        if (device === undefined) {
          const jwt = await signLoginJwt(user.id, settings.secret, now());
          pending.delete(token);
          logger.info({ userId: user.id }, 'login verified; JWT issued');
          return { user, jwt };
        }
        const created = await addDevice(user.id, device);
        pending.delete(token);
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
    },

    /**
     * What a link is for, without using it (the confirm page): its address and, for a pairing's
     * link, the device waiting for approval. Throws as verify would for a bad link.
     */
    async describeLink(token: string, client: string) {
      const link = await usableLink(token, client);
      return { email: link.email, pairing: await pairing.pairingOfLink(token) };
    },

    /** POST /auth/devices: a device for the user of a valid login JWT. */
    async registerDevice(
      jwt: string | undefined,
      input: DeviceInput,
    ): Promise<{ deviceToken: string; device: Device }> {
      const userId =
        jwt === undefined ? undefined : await verifyLoginJwt(jwt, settings.secret, now());
      const user = userId === undefined ? undefined : await findUserById(db, userId);
      if (user === undefined) throw unauthorized('missing, invalid or expired login JWT');
      await devicesPerJwt.consume(sha256Hex(jwt ?? '').slice(0, 16));
      const created = await addDevice(user.id, input);
      logger.info({ userId: user.id, deviceId: created.device.id }, 'device registered');
      return { deviceToken: created.token, device: created.device };
    },

    /**
     * The caller of a bearer device token: signature, stored digest and device existence are
     * checked; lastSeen is refreshed at most once a minute. Only failures count against the
     * client address (429 beyond the limit); a valid token always passes.
     */
    async authenticate(token: string | undefined, client: string): Promise<Caller> {
      const cached = token === undefined ? undefined : callers.get(token);
      if (cached !== undefined && cached.until > now()) {
        refreshLastSeen(cached.caller.device);
        return cached.caller;
      }
      const claims = verifyDeviceToken(token, settings.secret, settings.tokenSignature);
      const found = claims && (await findDeviceForAuth(db, claims.deviceId));
      const valid =
        found !== undefined &&
        found.device.userId === claims?.userId &&
        safeEqual(found.tokenDigest, sha256Hex(token ?? ''));
      if (!valid || token === undefined) {
        await authFailures.consume(client);
        throw unauthorized();
      }
      const caller: Caller = { user: found.user, device: found.device };
      refreshLastSeen(caller.device);
      if (callers.size >= callerCacheEntries) callers.clear();
      callers.set(token, { caller, until: now() + callerCacheMs });
      return caller;
    },

    /** The caller's devices, remembered like bearer checks and dropped on every change. */
    async listDevices(caller: Caller): Promise<Device[]> {
      const userId = caller.user.id;
      const hit = deviceLists.get(userId);
      if (hit !== undefined && hit.until > now()) return hit.devices;
      const devices = await listDevices(db, userId);
      if (deviceLists.size >= callerCacheEntries) deviceLists.clear();
      deviceLists.set(userId, { devices, until: now() + callerCacheMs });
      return devices;
    },

    /** Deletes one of the caller's devices and revokes it at once (relay connections too). */
    async deleteDevice(caller: Caller, id: number): Promise<void> {
      if ((await removeDevice(id, caller.user.id)) === undefined) throw notFound('device');
      logger.info({ userId: caller.user.id, deviceId: id }, 'device deleted');
    },

    removeDevice,

    /**
     * Deletes a user with devices, projects and subscription, revoking each device at once.
     * Resolves with the number of devices revoked, or undefined when there is no such user.
     */
    async deleteUser(id: number): Promise<number | undefined> {
      const deviceIds = await deleteUser(db, id, new Date(now()));
      if (deviceIds === undefined) return undefined;
      for (const deviceId of deviceIds) notifyRevoked(deviceId, id);
      return deviceIds.length;
    },

    /** Whether `credential` is a relay's, made with the shared secret (the relay feed's bearer). */
    isRelayCredential(credential: string | undefined): boolean {
      return verifyRelayCredential(credential, settings.secret, Math.floor(now() / 1000));
    },

    /** The owner and stored token digest of a device, for a relay's join check; undefined when deleted or never issued. */
    relayDevice(deviceId: number): Promise<{ userId: number; tokenDigest: string } | undefined> {
      return deviceDigest(db, deviceId);
    },

    /** Up to `limit` device deletions after sequence number `since` (the relays' feed). */
    revocationsSince(since: number, limit: number): Promise<RevocationEvent[]> {
      return revocationsSince(db, since, limit);
    },

    /** The sequence number of the latest device deletion (0: none yet). */
    latestRevocation(): Promise<number> {
      return latestRevocation(db);
    },

    onDeviceRevoked(listener: (deviceId: number, userId: number) => void): () => void {
      revokeListeners.add(listener);
      return () => revokeListeners.delete(listener);
    },

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
      if (!(await deleteProject(db, id, caller.user.id))) throw notFound('project');
      logger.info({ userId: caller.user.id, projectId: id }, 'project deleted');
    },

    subscription: (caller: Caller) => subscriptionOf(caller.user.id),
    subscriptionOf,

    /** Dev-mode links not used and not expired, newest first (admin UI). */
    pendingLinks(): PendingLink[] {
      prunePending();
      return [...pending.values()].reverse();
    },

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
