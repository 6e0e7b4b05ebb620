import type { RequestHandler } from 'express';
import { unauthorized } from '../auth/errors.ts';
import { Limiter } from '../auth/rate-limits.ts';
import { bearer, clientOf } from '../auth/request.ts';
import { safeEqual } from '../hashing.ts';
import type { Logger } from '../log.ts';

/** Failed admin-token attempts allowed per client address: 20 per 15 minutes by default. */
export const defaultAdminFailureLimit = { points: 20, seconds: 15 * 60 };

export interface AdminGuardOptions {
  /** The expected token (read on every request: the host owns it). */
  adminToken: () => string;
  logger: Logger;
  failureLimit?: { points: number; seconds: number };
}

/**
 * Lets a request through only with `Authorization: Bearer <adminToken>`, compared in constant
 * time. A missing or wrong token is 401; a client with too many failures gets 429 (with
 * Retry-After) even for the right token until the window passes. Failures are logged with the
 * client address, never with the token.
 */
export function createAdminGuard(options: AdminGuardOptions): RequestHandler {
  const limit = options.failureLimit ?? defaultAdminFailureLimit;
  const failures = new Limiter('admin token failures per client', limit, options.logger);
  return async (req, _res, next) => {
    const client = clientOf(req);
    await failures.check(client);
    const token = bearer(req);
    if (token !== undefined && safeEqual(token, options.adminToken())) {
      next();
      return;
    }
    const blocked = await failures.penalize(client);
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
