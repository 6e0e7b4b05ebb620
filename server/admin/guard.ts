import type { Request, RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError, unauthorized } from '../auth/errors.ts';
import { safeEqual } from '../auth/tokens.ts';
import type { Logger } from '../log.ts';

/** Failed admin-token attempts allowed per client address: 20 per 15 minutes by default. */
export const defaultAdminFailureLimit = { points: 20, seconds: 15 * 60 };

export interface AdminGuardOptions {
  /** The expected token (read on every request: the host owns it). */
  adminToken: () => string;
  logger: Logger;
  failureLimit?: { points: number; seconds: number };
}

const clientOf = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

function bearer(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return undefined;
  return /^Bearer[ \t]+(\S{1,512})[ \t]*$/i.exec(header)?.[1];
}

/**
 * Lets a request through only with `Authorization: Bearer <adminToken>`, compared in constant
 * time. A missing or wrong token is 401; a client with too many failures gets 429 (with
 * Retry-After) even for the right token until the window passes. Failures are logged with the
 * client address, never with the token.
 */
export function createAdminGuard(options: AdminGuardOptions): RequestHandler {
  const limit = options.failureLimit ?? defaultAdminFailureLimit;
  const failures = new RateLimiterMemory({ points: limit.points, duration: limit.seconds });
  return async (req, _res, next) => {
    const client = clientOf(req);
    const spent = await failures.get(client);
    if (spent !== null && spent.remainingPoints <= 0) throw tooMany(spent);
    const token = bearer(req);
    if (token !== undefined && safeEqual(token, options.adminToken())) {
      next();
      return;
    }
    const blocked = await failures.consume(client).then(
      () => false,
      (err: unknown) => {
        if (err instanceof RateLimiterRes) return true;
        throw err;
      },
    );
    options.logger.warn(
      {
        client,
        method: req.method,
        path: req.path,
        reason: token === undefined ? 'missing' : 'wrong',
        blocked,
      },
      'admin API: rejected a request without a valid admin token',
    );
    throw unauthorized('missing or invalid admin token');
  };
}

function tooMany(res: RateLimiterRes): AppError {
  return new AppError(
    'rate_limited',
    'too many requests with a wrong admin token; try again later',
    Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
  );
}
