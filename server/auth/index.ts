import { createServer, type Server } from 'node:http';
import type { Express } from 'express';
import type { AuthConfig } from '../config/auth-config.ts';
import { type Db, openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrate.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { closeServer, listen } from '../http-listen.ts';
import type { Logger } from '../log.ts';
import { version } from '../version.ts';
import { createAuthApp } from './app.ts';
import { createDevMailer, createSmtpMailer } from './mail.ts';
import type { AuthLimits } from './rate-limits.ts';
import { type AuthService, createAuthService } from './service.ts';

export interface AuthServerOptions {
  config: AuthConfig;
  /** Effective shared secret (configured or generated). */
  secret: string;
  /** Public URLs; may be set later with setUrls once the ports are known. */
  urls?: { baseUrl: string; relayUrl: string };
  logger: Logger;
  /** Where user-facing lines go (dev-mode magic links). */
  print: (line: string) => void;
  now?: () => number;
  limits?: Partial<AuthLimits>;
  sqliteEngine?: 'native' | 'wasm';
  /** Extra routes (admin API and UI), given the service and database. */
  mount?: (app: Express, service: AuthService, db: Db) => void;
  /** How often a failed first migration is retried while the database is down. */
  retryMs?: number;
}

export interface AuthServer {
  service: AuthService;
  db: Db;
  app: Express;
  server: Server;
  /** Resolves once the schema is in place (retries while the database is unreachable). */
  ready: Promise<void>;
  listen(): Promise<number>;
  /** Sets the public base URL (magic links, discovery) and the advertised relay URL. */
  setUrls(urls: { baseUrl: string; relayUrl: string }): void;
  close(): Promise<void>;
}

/** Opens the database, prepares the schema, and builds the HTTP server of the auth service. */
export async function createAuthServer(options: AuthServerOptions): Promise<AuthServer> {
  const { config, logger } = options;
  const db = await openDatabase(config.db, { logger, sqliteEngine: options.sqliteEngine });
  const mailer = config.smtp
    ? createSmtpMailer(config.smtp, logger)
    : createDevMailer(options.print);
  if (!config.smtp)
    logger.warn(
      'SMTP is not configured: development mode, magic-link tokens are printed on stdout',
    );
  const urls = { baseUrl: options.urls?.baseUrl ?? '', relayUrl: options.urls?.relayUrl ?? '' };
  const settings = {
    secret: options.secret,
    tokenSignature: config.tokenSignature,
    baseUrl: urls.baseUrl,
    defaultTier: config.defaultTier,
    signup: config.signup,
    allowedEmails: config.allowedEmails,
  };
  const service = createAuthService({
    db,
    mailer,
    logger,
    now: options.now,
    limits: options.limits,
    settings,
  });

  let isReady = false;
  let closed = false;
  const ready = (async () => {
    for (;;) {
      try {
        const applied = await migrate(db);
        if (applied.length > 0)
          logger.info(
            { driver: db.driver, versions: applied },
            'database schema created or upgraded',
          );
        isReady = true;
        return;
      } catch (err: unknown) {
        if (!isDatabaseUnavailable(err) || closed) throw err;
        logger.error({ err: (err as Error).message }, 'database unreachable at start; retrying');
        await new Promise((r) => setTimeout(r, options.retryMs ?? 2_000));
      }
    }
  })();

  const app = createAuthApp({
    service,
    logger,
    isReady: () => isReady,
    discovery: () => ({ authUrl: urls.baseUrl, relayUrl: urls.relayUrl, version }),
    mount: options.mount && ((a) => options.mount?.(a, service, db)),
  });
  const server = createServer(
    { requestTimeout: 30_000, headersTimeout: 10_000, keepAliveTimeout: 5_000 },
    app,
  );
  server.maxHeadersCount = 100;

  return {
    service,
    db,
    app,
    server,
    ready,
    listen: () => listen(server, config.port, config.bind, 'PORT in auth.conf'),
    setUrls(next) {
      urls.baseUrl = next.baseUrl;
      urls.relayUrl = next.relayUrl;
      settings.baseUrl = next.baseUrl;
    },
    async close() {
      closed = true;
      await closeServer(server);
      mailer.close();
      await ready.catch(() => {});
      await db.close();
    },
  };
}
