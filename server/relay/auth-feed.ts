import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { MemberRevocation } from '../../protocol/room-grant.ts';
import { randomHex, safeEqual } from '../hashing.ts';
import type { Logger } from '../log.ts';
import { roomCheckAnswer, roomCheckMac, roomDirectoryAsking } from '../store/room-check.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import { relayCredentialSkewSeconds, signRelayCredential } from '../tokens.ts';
import type { DeviceDirectory } from './stored-device-check.ts';

/**
 * A relay running as its own process and the auth service (`auth.url` in relay.conf): device
 * lookups for join checks, and the feed of deleted devices. Every request carries a credential
 * made from the shared secret and the current time (`signRelayCredential`).
 */
export interface AuthFeedOptions {
  /** The auth service's URL, without a trailing slash. */
  url: string;
  secret: string;
  logger: Logger;
  now?: () => number;
  /** Longest wait of one feed request at the auth service (long poll). Default 20 s. */
  waitMs?: number;
  /** Pause before asking again after a failed request. Default 1 s. */
  retryMs?: number;
  /** A device lookup not answered within this time counts as unreachable. Default 3 s. */
  lookupTimeoutMs?: number;
  /** The auth service's clock, shared by the lookups and the feed of one relay. */
  clock?: AuthServiceClock;
}

const revocationSchema = z.union([
  z.object({
    seq: z.number().int().positive(),
    deviceId: z.number().int().positive(),
    revokedAt: z.number().int().nonnegative(),
  }),
  z.object({
    seq: z.number().int().positive(),
    roomId: z.string().min(1).max(255),
    userId: z.number().int().positive(),
    memberId: z.number().int().positive(),
  }),
]);
const feedAnswer = z.object({
  revocations: z.array(revocationSchema),
  next: z.number().int().nonnegative(),
  reset: z.boolean(),
});
const deviceAnswer = z.object({
  device: z.object({
    userId: z.number().int().positive(),
    tokenDigest: z.string().regex(/^[0-9a-f]{64}$/),
  }),
});

/**
 * The auth service's clock as this relay signs its credentials on: its own, moved by the
 * difference an answer's `Date` showed when the auth service refused a credential whose time was
 * more than 300 s from its clock. So a relay whose clock is wrong by minutes keeps its device
 * checks and revocations (said once in a warning line) instead of losing both.
 */
export class AuthServiceClock {
  #offsetSeconds = 0;

  constructor(
    private readonly now: () => number,
    private readonly logger: Logger,
  ) {}

  /** What this relay adds to its own clock's seconds (the auth service's minus its own). */
  get offsetSeconds(): number {
    return this.#offsetSeconds;
  }

  /** The unix second a credential made now carries. */
  seconds(): number {
    return Math.floor(this.now() / 1000) + this.#offsetSeconds;
  }

  /**
   * After a 401 to a credential made with `signedOffset`: whether the answer's `Date` shows that
   * its time was too far from the auth service's clock (then later ones are signed on that
   * clock, also when another request moved it first: ask again).
   */
  refused(res: Response, signedOffset: number): boolean {
    const date = Date.parse(res.headers.get('date') ?? '');
    if (Number.isNaN(date)) return false;
    const offset = Math.round((date - this.now()) / 1000);
    // the credential had a margin of 300 s; half of it leaves room for the Date's rounding
    const far = (from: number) => Math.abs(offset - from) > relayCredentialSkewSeconds / 2;
    if (!far(signedOffset)) return false;
    if (!far(this.#offsetSeconds)) return true;
    this.#offsetSeconds = offset;
    this.logger.warn(
      { offsetSeconds: offset },
      `relay: this machine's clock is ${Math.abs(offset)} s ${offset > 0 ? 'behind' : 'ahead of'} the auth service's (a relay credential may differ by ${relayCredentialSkewSeconds} s): signing them on the auth service's clock from now on; set this machine's time (NTP)`,
    );
    return true;
  }
}

/** A request to the auth service with a fresh relay credential, asked once again on its clock. */
async function authRequest(
  options: AuthFeedOptions,
  clock: AuthServiceClock,
  path: string,
  signal: () => AbortSignal,
  body?: object,
): Promise<Response> {
  const send = () =>
    fetch(`${options.url}${path}`, {
      headers: {
        authorization: `Bearer ${signRelayCredential(options.secret, clock.seconds())}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { method: 'POST', body: JSON.stringify(body) }),
      signal: signal(),
    });
  const signedOffset = clock.offsetSeconds;
  const res = await send();
  if (res.status !== 401 || !clock.refused(res, signedOffset)) return res;
  await res.body?.cancel();
  return send();
}

const clockOf = (options: AuthFeedOptions): AuthServiceClock =>
  options.clock ?? new AuthServiceClock(options.now ?? Date.now, options.logger);

/** Why an answer of the auth service is no answer, in one line. */
function refusal(status: number): Error {
  return new Error(
    status === 401
      ? 'the auth service refused the relay credential: auth.secret differs from its AUTH_SECRET'
      : `the auth service answered ${status}`,
  );
}

/** Devices looked up at the auth service: undefined for a 404, a rejection when it cannot answer. */
export function createAuthDirectory(options: AuthFeedOptions): DeviceDirectory {
  const timeoutMs = options.lookupTimeoutMs ?? 3_000;
  const clock = clockOf(options);
  return {
    async lookup(deviceId) {
      const res = await authRequest(options, clock, `/relay/devices/${deviceId}`, () =>
        AbortSignal.timeout(timeoutMs),
      );
      if (res.status === 404) {
        await res.body?.cancel();
        return undefined;
      }
      if (!res.ok) {
        await res.body?.cancel();
        throw refusal(res.status);
      }
      return deviceAnswer.parse(await res.json()).device;
    },
  };
}

/**
 * Rooms per room check over HTTP: 100 room ids (about 75 bytes each in JSON) stay well below the
 * auth service's 16 KiB bound on a request body.
 */
const roomsPerHttpCheck = 100;

/**
 * Which rooms of the relay's document store still have a project, asked at the auth service
 * (`POST /relay/rooms/check`). Rejects when it cannot answer, or when an answer's MAC is wrong
 * (an answer not made with the shared secret): the sweep then deletes nothing.
 */
export function createAuthRoomDirectory(options: AuthFeedOptions): RoomDirectory {
  const timeoutMs = options.lookupTimeoutMs ?? 3_000;
  const clock = clockOf(options);
  return roomDirectoryAsking(async (rooms) => {
    const nonce = randomHex(16);
    const res = await authRequest(
      options,
      clock,
      '/relay/rooms/check',
      () => AbortSignal.timeout(timeoutMs),
      { rooms, nonce },
    );
    if (!res.ok) {
      await res.body?.cancel();
      throw refusal(res.status);
    }
    const answer = roomCheckAnswer.safeParse(await res.json().catch(() => undefined));
    const { secret } = options;
    if (
      !answer.success ||
      !safeEqual(answer.data.mac, roomCheckMac(secret, nonce, rooms, answer.data.existing))
    ) {
      throw new Error('a room check was answered without the shared secret’s MAC');
    }
    return answer.data.existing;
  }, roomsPerHttpCheck);
}

/** What the feed does to the relay. */
export interface FeedTarget {
  /** Closes the device's connections with 4003 and refuses its tokens issued up to `revokedAt`. */
  revokeDevice(deviceId: number, revokedAt: number): void;
  /** A membership ended: closes the member's connections to its room with 4003 and refuses its grant. */
  revokeMember(member: MemberRevocation): void;
  /**
   * The feed was reset (the auth database was replaced, or deletions past the relay's cursor
   * were pruned): check the connected and cached devices again. Rejects when that cannot be done
   * now; the feed then asks again from the same cursor.
   */
  recheckDevices(): Promise<void>;
}

/** Where the feed resumes after a restart (see `feed-cursor.ts`). */
export interface CursorStore {
  read(): number;
  write(since: number): void;
}

/**
 * Follows the auth service's feed of deleted devices from the saved cursor (its beginning
 * without one), then from the last one seen: a long poll that the auth service answers at once
 * when a device is deleted, so an idle relay sends one request per `waitMs`. After a failure it
 * asks again every `retryMs` from where it stopped, so no deletion is missed. The cursor is saved
 * after the revocations it covers were handed to the relay. Returns the stop function.
 */
export function followAuthFeed(
  options: AuthFeedOptions,
  target: FeedTarget,
  cursor?: CursorStore,
): () => Promise<void> {
  const { logger } = options;
  const waitMs = options.waitMs ?? 20_000;
  const retryMs = options.retryMs ?? 1_000;
  const stopping = new AbortController();
  const clock = clockOf(options);
  let since = cursor?.read() ?? 0;
  if (since > 0) logger.info({ since }, 'relay: resuming the auth service’s revocations');
  let failing = false;
  let caughtUp = false;

  async function once(): Promise<void> {
    const res = await authRequest(
      options,
      clock,
      `/relay/revocations?since=${since}&waitMs=${waitMs}`,
      () => AbortSignal.any([stopping.signal, AbortSignal.timeout(waitMs + 10_000)]),
    );
    if (!res.ok) {
      await res.body?.cancel();
      throw refusal(res.status);
    }
    const answer = feedAnswer.parse(await res.json());
    for (const event of answer.revocations) {
      if ('deviceId' in event) target.revokeDevice(event.deviceId, event.revokedAt);
      else target.revokeMember(event);
    }
    if (answer.reset) {
      logger[since === 0 ? 'info' : 'warn'](
        { since },
        'relay: the auth service’s revocations do not reach back to this cursor (database replaced, or older ones pruned); checking connected devices again',
      );
      await target.recheckDevices();
    }
    since = answer.next;
    // After relay.db took the revocations above (its writes are queued for the next turn).
    if (cursor !== undefined) await setImmediate().then(() => cursor.write(since));
    if (failing) logger.info('relay: following the auth service’s revocations again');
    else if (!caughtUp && answer.revocations.length === 0) {
      logger.info({ authUrl: options.url }, 'relay: following the auth service’s revocations');
    }
    if (answer.revocations.length === 0) caughtUp = true;
    failing = false;
  }

  async function loop(): Promise<void> {
    while (!stopping.signal.aborted) {
      try {
        await once();
      } catch (err: unknown) {
        if (stopping.signal.aborted) return;
        if (!failing) {
          logger.warn(
            { err: err instanceof Error ? err.message : String(err), authUrl: options.url },
            'relay: cannot follow the auth service’s revocations; retrying',
          );
        }
        failing = true;
        await sleep(retryMs, undefined, { signal: stopping.signal }).catch(() => undefined);
      }
    }
  }

  const running = loop();
  return async () => {
    stopping.abort();
    await running;
  };
}
