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
 * time. The token is checked first: the right one always passes. A missing or wrong token is
 * 401 and counts against the client address; beyond the failure limit wrong tokens get 429
 * (with Retry-After) until the window passes. Failures are logged with the client address,
 * never with the token.
 */
export function createAdminGuard(options: AdminGuardOptions): RequestHandler {
  const limit = options.failureLimit ?? defaultAdminFailureLimit;
  const failures = new Limiter('admin token failures per client', limit, options.logger);
  return async (req, _res, next) => {
    const token = bearer(req);
    if (token !== undefined && safeEqual(token, options.adminToken())) {
      next();
      return;
    }
    const client = clientOf(req);
    await failures.consume(client);
    options.logger.warn(
      {
        client,
        method: req.method,
        path: req.path,
        reason: token === undefined ? 'missing' : 'wrong',
      },
      'admin API: rejected a request without a valid admin token',
    );
    throw unauthorized('missing or invalid admin token');
  };
}
