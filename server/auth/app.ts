import express, { type ErrorRequestHandler, type Express } from 'express';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Logger } from '../log.ts';
import { AppError, unavailable } from './errors.ts';
import { addAuthRoutes } from './routes.ts';
import type { AuthService } from './service.ts';

/** Request bodies are JSON of at most 16 KiB. */
export const maxBodyBytes = 16 * 1024;

export interface AuthAppOptions {
  service: AuthService;
  logger: Logger;
  /** Whether the database is migrated and usable; requests get 503 until it is. */
  isReady: () => boolean;
  /** What GET /.well-known/sync-host answers. */
  discovery: () => { authUrl: string; relayUrl: string; version: string };
  /** Extra routers mounted before the 404 handler (admin API and UI). */
  mount?: (app: Express) => void;
}

/** Renders every failure as the contract's `{"error":{"code","message"}}`, never a stack. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    let error: AppError;
    if (err instanceof AppError) {
      error = err;
    } else if (isBodyParserError(err)) {
      error =
        err.type === 'entity.too.large'
          ? new AppError('payload_too_large', `request body is larger than ${maxBodyBytes} bytes`)
          : new AppError(
              'invalid_request',
              err.type === 'entity.parse.failed'
                ? 'body is not valid JSON'
                : 'body could not be read',
            );
    } else if (isDatabaseUnavailable(err)) {
      logger.error({ err: (err as Error).message, path: req.path }, 'database unavailable');
      error = unavailable();
    } else {
      logger.error({ err, path: req.path, method: req.method }, 'unhandled error');
      error = new AppError('internal', 'internal error');
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    if (error.retryAfterSeconds !== undefined)
      res.set('Retry-After', String(error.retryAfterSeconds));
    res.status(error.status).json({ error: { code: error.code, message: error.message } });
  };
}

function isBodyParserError(err: unknown): err is { type: string; status: number } {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { type?: unknown }).type === 'string' &&
    typeof (err as { status?: unknown }).status === 'number'
  );
}

/** The auth HTTP application: /health, /.well-known/sync-host, /auth/*, JSON errors. */
export function createAuthApp(options: AuthAppOptions): Express {
  const { service, logger } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });

  app.get('/health', async (_req, res) => {
    try {
      if (!options.isReady()) throw unavailable();
      await service.health();
      res.json({ status: 'ok' });
    } catch {
      res.status(503).json({ status: 'unavailable' });
    }
  });

  app.get('/.well-known/sync-host', (_req, res) => {
    res.json(options.discovery());
  });

  addAuthRoutes(app, service, {
    ready: (_req, _res, next) => {
      if (!options.isReady()) throw unavailable();
      next();
    },
    body: express.json({ limit: maxBodyBytes, strict: true, type: () => true }),
  });

  options.mount?.(app);

  app.use((req, res) => {
    res
      .status(404)
      .json({ error: { code: 'not_found', message: `no route ${req.method} ${req.path}` } });
  });
  app.use(errorHandler(logger));
  return app;
}
