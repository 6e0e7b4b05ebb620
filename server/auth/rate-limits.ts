import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { addressGroup } from '../address-group.ts';
import type { Logger } from '../log.ts';
import { AppError } from './errors.ts';

/** Limits of the auth service: `points` per `seconds`. */
export interface AuthLimits {
  /** Link requests per e-mail address (contract: 5 per 15 minutes). */
  linksPerEmail: { points: number; seconds: number };
  /** Link requests per client address (contract: 30 per 15 minutes). */
  linksPerClient: { points: number; seconds: number };
  /** Failed verify attempts per client address (brute force of link tokens). */
  verifiesPerClient: { points: number; seconds: number };
  /** Failed bearer-token checks per client address (brute force of device tokens). */
  authFailuresPerClient: { points: number; seconds: number };
  /** Devices one login JWT may register (its lifetime is 15 minutes). */
  devicesPerJwt: { points: number; seconds: number };
  /** Pairings started per client address. */
  pairingsPerClient: { points: number; seconds: number };
  /** Polls of unknown pairingIds per client address (guessing ids). */
  pairPollFailuresPerClient: { points: number; seconds: number };
  /** Unknown or wrong pairing codes per approver (a device, or the administrator). */
  pairCodeFailuresPerApprover: { points: number; seconds: number };
  /** Unknown or wrong pairing codes per client address. */
  pairCodeFailuresPerClient: { points: number; seconds: number };
  /** Pairings waiting for approval at once, all client addresses together. */
  pendingPairings: number;
  /**
   * Pairings waiting at once from one client address (an IPv6 address counts for its /64): a
   * flood from a few addresses cannot take every place from a device at another.
   */
  pendingPairingsPerClient: number;
}

export const defaultAuthLimits: AuthLimits = {
  linksPerEmail: { points: 5, seconds: 15 * 60 },
  linksPerClient: { points: 30, seconds: 15 * 60 },
  verifiesPerClient: { points: 60, seconds: 15 * 60 },
  authFailuresPerClient: { points: 100, seconds: 15 * 60 },
  devicesPerJwt: { points: 5, seconds: 15 * 60 },
  pairingsPerClient: { points: 30, seconds: 15 * 60 },
  pairPollFailuresPerClient: { points: 30, seconds: 15 * 60 },
  pairCodeFailuresPerApprover: { points: 10, seconds: 15 * 60 },
  pairCodeFailuresPerClient: { points: 20, seconds: 15 * 60 },
  pendingPairings: 50,
  pendingPairingsPerClient: 5,
};

/**
 * A named in-memory limiter that throws 429 `rate_limited` with Retry-After when exhausted.
 * Failure limiters spend points only on failures, after the credential was checked, so valid
 * credentials always pass whatever others sent from the same address (a reverse proxy, a NAT).
 * A key that is an IPv6 address counts for its whole /64 (server/address-group.ts): one
 * subscriber holds that many addresses.
 */
export class Limiter {
  readonly #limiter: RateLimiterMemory;

  constructor(
    readonly name: string,
    limit: { points: number; seconds: number },
    private readonly logger: Logger,
    /** What the 429 says; default "too many requests; try again later". */
    private readonly message = 'too many requests; try again later',
  ) {
    this.#limiter = new RateLimiterMemory({ points: limit.points, duration: limit.seconds });
  }

  /** Spends one point for `key`; throws AppError 429 when none is left. */
  async consume(key: string): Promise<void> {
    try {
      await this.#limiter.consume(addressGroup(key));
    } catch (err: unknown) {
      if (err instanceof RateLimiterRes) throw this.#tooMany(key, err);
      throw err;
    }
  }

  /**
   * Throws the 429 when `key` has no point left, without spending one. Only for a key that is
   * the caller's own (an authenticated approver), never a shared client address.
   */
  async refuseIfSpent(key: string): Promise<void> {
    const res = await this.#limiter.get(addressGroup(key));
    if (res !== null && res.remainingPoints <= 0) throw this.#tooMany(key, res);
  }

  #tooMany(key: string, res: RateLimiterRes): AppError {
    this.logger.warn({ limit: this.name, key }, 'rate limit reached');
    return new AppError(
      'rate_limited',
      this.message,
      Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
    );
  }
}
