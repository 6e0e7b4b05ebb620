import type { Express } from 'express';
import type { Tier } from '../../protocol/tiers.ts';
import type { AuthService } from '../auth/service.ts';
import type { Db } from '../db/connect.ts';
import type { Host, HostOptions } from '../host.ts';
import type { Logger } from '../log.ts';
import { createAdminGuard } from './guard.ts';
import { createAdminRouter } from './routes.ts';
import { createAdminUiRouter } from './ui.ts';

export { adminCsp } from './ui.ts';

export interface AdminOptions {
  logger: Logger;
  /** Tier of invited users (DEFAULT_TIER). */
  defaultTier: Tier;
  now?: () => number;
  /** Failed admin-token attempts per client address. Default 20 per 15 minutes. */
  failureLimit?: { points: number; seconds: number };
  /** Where the UI bundle is and what to build it from; false: no UI, API only. */
  ui?: { distDir?: string; sourceDir?: string | false } | false;
}

/**
 * The `mount` hook of startHost that adds the admin API (`/admin/api/*`, bearer admin token)
 * and the admin UI (`/admin/`) to the auth port.
 */
export function createAdminMount(options: AdminOptions): NonNullable<HostOptions['mount']> {
  return (app: Express, service: AuthService, db: Db, host: () => Host) => {
    const guard = createAdminGuard({
      adminToken: () => host().adminToken,
      logger: options.logger,
      failureLimit: options.failureLimit,
    });
    app.use(
      '/admin/api',
      guard,
      createAdminRouter({
        service,
        db,
        host,
        logger: options.logger,
        defaultTier: options.defaultTier,
        now: options.now,
      }),
    );
    if (options.ui !== false)
      app.use('/admin', createAdminUiRouter({ logger: options.logger, ...options.ui }));
  };
}
