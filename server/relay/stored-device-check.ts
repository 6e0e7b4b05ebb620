import type { DeviceTokenClaims } from '../../protocol/device-token.ts';
import { safeEqual, sha256Hex } from '../hashing.ts';
import type { Logger } from '../log.ts';

/** What the auth service stores about a device: its owner and the SHA-256 digest of its token. */
export interface DeviceRecord {
  userId: number;
  tokenDigest: string;
}

/**
 * Where the relay looks devices up: the auth database when co-hosted, the auth service's relay
 * feed (`auth.url`) when the relay runs as its own process. Resolves undefined for a device that
 * was deleted or never issued; rejects when the auth side cannot be reached.
 */
export interface DeviceDirectory {
  lookup(deviceId: number): Promise<DeviceRecord | undefined>;
}

/**
 * The join-time check of a signed token against the auth side, with a cache of the devices seen.
 * `verify` answers at once (a boolean) when the device is cached, else a promise.
 */
export interface DeviceCheck {
  /**
   * Whether a token whose signature already passed is the one issued for its device. While the
   * auth side cannot be reached, an uncached device passes: the signature decides.
   */
  verify(claims: DeviceTokenClaims, token: string): boolean | Promise<boolean>;
  /** Drops one device from the cache (it was deleted). */
  forget(deviceId: number): void;
  /** Drops every device from the cache (the auth database was replaced). */
  forgetAll(): void;
  /**
   * Forgets every cached device, then looks `deviceIds` up again (a few at a time): resolves
   * with those that no longer exist, rejects when the auth side cannot answer for one.
   */
  recheck(deviceIds: Iterable<number>): Promise<number[]>;
}

/** Lookups in flight at once during a recheck. */
const recheckConcurrency = 8;

/** Devices remembered at most; the oldest entry goes first beyond it. */
const defaultMaxEntries = 50_000;

/** Caches a device's record; the oldest entry goes first beyond `maxEntries`. */
function remember(
  known: Map<number, DeviceRecord>,
  deviceId: number,
  record: DeviceRecord,
  maxEntries: number,
): void {
  if (known.size >= maxEntries) {
    const oldest = known.keys().next();
    if (oldest.done !== true) known.delete(oldest.value);
  }
  known.set(deviceId, record);
}

/** A cache of `directory` in front of join checks. */
export function createDeviceCheck(
  directory: DeviceDirectory,
  logger: Logger,
  maxEntries = defaultMaxEntries,
): DeviceCheck {
  const known = new Map<number, DeviceRecord>();
  const lookups = new Map<number, Promise<DeviceRecord | undefined>>();
  // Bumped by every forget: a lookup answered before a deletion is then not cached.
  let generation = 0;
  let unreachable = false;

  const matches = (record: DeviceRecord, claims: DeviceTokenClaims, token: string) =>
    record.userId === claims.userId && safeEqual(sha256Hex(token), record.tokenDigest);

  function lookup(deviceId: number): Promise<DeviceRecord | undefined> {
    const pending = lookups.get(deviceId);
    if (pending !== undefined) return pending;
    const started = generation;
    const promise = directory.lookup(deviceId).then(
      (record) => {
        lookups.delete(deviceId);
        if (unreachable) logger.info('relay: device checks reach the auth side again');
        unreachable = false;
        if (record !== undefined && started === generation) {
          remember(known, deviceId, record, maxEntries);
        }
        return record;
      },
      (err: unknown) => {
        lookups.delete(deviceId);
        throw err;
      },
    );
    lookups.set(deviceId, promise);
    return promise;
  }

  return {
    verify(claims, token) {
      const record = known.get(claims.deviceId);
      if (record !== undefined) return matches(record, claims, token);
      return lookup(claims.deviceId).then(
        (found) => found !== undefined && matches(found, claims, token),
        (err: unknown) => {
          if (!unreachable) {
            logger.warn(
              { err: err instanceof Error ? err.message : String(err) },
              'relay: cannot reach the auth side to check a device; signatures alone decide until it answers',
            );
          }
          unreachable = true;
          return true;
        },
      );
    },
    forget(deviceId) {
      generation++;
      known.delete(deviceId);
    },
    forgetAll() {
      generation++;
      known.clear();
    },
    async recheck(deviceIds) {
      this.forgetAll();
      const queue = [...new Set(deviceIds)];
      const gone: number[] = [];
      const worker = async () => {
        for (let id = queue.pop(); id !== undefined; id = queue.pop()) {
          if ((await lookup(id)) === undefined) gone.push(id);
        }
      };
      await Promise.all(Array.from({ length: recheckConcurrency }, worker));
      return gone;
    },
  };
}
