import type { Db } from '../db/connect.ts';
import {
  createDevice,
  type Device,
  deleteDevice,
  deviceOwner,
  findDeviceForAuth,
  listDevices,
  touchDevice,
} from '../db/devices.ts';
import { findUserById, type User } from '../db/users.ts';
import { safeEqual, sha256Hex } from '../hashing.ts';
import type { Logger } from '../log.ts';
import { signDeviceToken, verifyDeviceToken } from '../tokens.ts';
import { AppError, notFound, unauthorized } from './errors.ts';
import { verifyLoginJwt } from './jwt.ts';
import { type AuthLimits, Limiter } from './rate-limits.ts';
import type { AuthSettings } from './settings.ts';

/** lastSeen is written at most once per this interval per device, not on every request. */
export const lastSeenRefreshMs = 60_000;
/**
 * A successful bearer check is remembered this long, so a busy client costs no database read
 * and no HMAC per request. Deleting a device (user, admin, or a user's deletion) drops its
 * entries at once in this process; see docs/auth.md for several auth processes on one database.
 */
export const callerCacheMs = 10_000;
/** Entries kept at most; the cache is emptied when it is full. */
const callerCacheEntries = 10_000;

export interface Caller {
  user: User;
  device: Device;
}

export type DeviceInput = { deviceName: string; platform: string };

export interface DeviceServiceOptions {
  db: Db;
  settings: Pick<AuthSettings, 'secret' | 'tokenSignature' | 'deviceLimit'>;
  logger: Logger;
  now: () => number;
  limits: Pick<AuthLimits, 'authFailuresPerClient' | 'devicesPerJwt'>;
}

export type DeviceService = ReturnType<typeof createDeviceService>;

/**
 * Devices and their bearer tokens: registration, the bearer check with its cache, listing,
 * deletion and the revocation that goes with it.
 */
export function createDeviceService(options: DeviceServiceOptions) {
  const { settings, logger, now, limits } = options;
  const devicesPerJwt = new Limiter(
    'devices per login JWT',
    limits.devicesPerJwt,
    logger,
    `this sign-in code has registered ${limits.devicesPerJwt.points} devices, the most one code may; sign in again`,
  );
  const ctx: DeviceContext = {
    ...options,
    revokeListeners: new Set(),
    callers: new Map(),
    deviceLists: new Map(),
  };
  const { db, revokeListeners } = ctx;
  const { addDevice, notifyRevoked, removeDevice } = deviceChanges(ctx);

  return {
    addDevice,
    notifyRevoked,
    removeDevice,
    ...bearerChecks(ctx),

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

    /** Deletes one of the caller's devices and revokes it at once (relay connections too). */
    async deleteDevice(caller: Caller, id: number): Promise<void> {
      if ((await removeDevice(id, caller.user.id)) === undefined) throw notFound('device');
      logger.info({ userId: caller.user.id, deviceId: id }, 'device deleted');
    },

    onDeviceRevoked(listener: (deviceId: number, userId: number) => void): () => void {
      revokeListeners.add(listener);
      return () => revokeListeners.delete(listener);
    },
  };
}

/** What the parts of the device service share: its options, its caches and its listeners. */
interface DeviceContext extends DeviceServiceOptions {
  revokeListeners: Set<(deviceId: number, userId: number) => void>;
  /** Bearer checks remembered by token. */
  callers: Map<string, { caller: Caller; until: number }>;
  /** Each user's devices, remembered and dropped on every change. */
  deviceLists: Map<number, { devices: Device[]; until: number }>;
}

/** A device added, removed, or gone: the caches forget it and the listeners hear of it. */
function deviceChanges(ctx: DeviceContext) {
  const { db, settings, logger, now, callers, deviceLists, revokeListeners } = ctx;
  const signToken = (userId: number) => (deviceId: number) =>
    signDeviceToken(
      { userId, deviceId, issuedAt: Math.floor(now() / 1000) },
      settings.secret,
      settings.tokenSignature,
    );

  /** A new device of a user, with its freshly signed token; `device_limit` beyond DEVICE_LIMIT. */
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

  return { addDevice, notifyRevoked, removeDevice };
}

/** The bearer check of a device token and the caller's devices, each remembered for a while. */
function bearerChecks(ctx: DeviceContext) {
  const { db, settings, logger, now, limits, callers, deviceLists } = ctx;
  const authFailures = new Limiter(
    'auth failures per client',
    limits.authFailuresPerClient,
    logger,
  );

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

  return {
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
  };
}
