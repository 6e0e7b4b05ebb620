import express, { type ErrorRequestHandler, type Express, type RequestHandler } from 'express';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Logger } from '../log.ts';
import { jsonBody, maxBodyBytes } from './body.ts';
import { AppError, unavailable } from './errors.ts';
import { sendPage, welcomePage } from './html.ts';
import { addAuthRoutes } from './routes.ts';
import type { AuthService } from './service.ts';

export interface AuthAppOptions {
  service: AuthService;
  logger: Logger;
  /** Whether the database is migrated and usable; requests get 503 until it is. */
  isReady: () => boolean;
  /** What GET /.well-known/sync-host answers (`smtp`: whether login links are e-mailed). */
  discovery: () => {
    authUrl: string;
    relayUrl: string;
    version: string;
    smtp: boolean;
    /** The certificate's fingerprint when the host speaks TLS. */
    fingerprint?: string;
  };
  /**
   * Reverse proxies (addresses, CIDRs) whose X-Forwarded-For gives the client address; empty:
   * the socket's address is the client's.
   */
  trustProxy?: readonly string[];
  /** Extra routers mounted before the 404 handler (admin API and UI). */
  mount?: (app: Express) => void;
}

/** Renders every failure as the API's error shape `{"error":{"code","message"}}`, never a stack. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    let error: AppError;
    if (err instanceof AppError) {
      error = err;
    } else if (err instanceof URIError) {
      // the router could not decode a path parameter (`/auth/pair/%ff`)
      error = new AppError('invalid_request', 'the path is not valid percent-encoding');
    } else if (isBodyError(err)) {
      error = bodyError(err, req.headers['content-encoding']);
      logger.info(
        { path: req.path, status: error.status, reason: err.type ?? err.code ?? err.message },
        'request body refused',
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

/** A body the parser refused: a 4xx http-error, with a `type` or a zlib `code` saying why. */
interface BodyError {
  status: number;
  message: string;
  type?: string;
  code?: string;
}

function isBodyError(err: unknown): err is BodyError {
  if (typeof err !== 'object' || err === null) return false;
  const { status, expose } = err as { status?: unknown; expose?: unknown };
  return typeof status === 'number' && status >= 400 && status < 500 && expose === true;
}

/** The error of a refused body: 413, 415 for an unknown encoding, else 400. */
function bodyError(err: BodyError, encoding: string | undefined): AppError {
  if (err.type === 'entity.too.large')
    return new AppError('payload_too_large', `request body is larger than ${maxBodyBytes} bytes`);
  if (err.type === 'encoding.unsupported')
    return new AppError(
      'unsupported_media_type',
      `Content-Encoding "${encoding}" is not supported (use gzip, deflate, br or none)`,
    );
  if (err.type === 'charset.unsupported')
    return new AppError('unsupported_media_type', err.message);
  if (err.type === 'entity.parse.failed')
    return new AppError('invalid_request', 'body is not valid JSON');
  if (err.code?.startsWith('Z_') === true || err.code?.startsWith('ERR_BROTLI') === true)
    return new AppError('invalid_request', `body could not be decompressed (${encoding})`);
  return new AppError('invalid_request', 'body could not be read');
}

/** Paths browser-based clients call from other origins (never /admin). */
const crossOriginPaths = /^\/(?:health$|\.well-known\/sync-host$|auth(?:\/|$))/;

/**
 * CORS for the public API: any origin, bearer tokens only (no cookies, so no credentials
 * mode), preflights answered 204. /admin/* sends no CORS headers: other origins cannot read it.
 */
const corsForApi: RequestHandler = (req, res, next) => {
  if (!crossOriginPaths.test(req.path)) {
    next();
    return;
  }
  res.set('Access-Control-Allow-Origin', '*');
  if (req.method !== 'OPTIONS') {
    res.set('Access-Control-Expose-Headers', 'Retry-After');
    next();
    return;
  }
  res.set({
    'Access-Control-Allow-Methods': 'GET, POST, PATCH, DELETE',
    'Access-Control-Allow-Headers': 'Authorization, Content-Type',
    'Access-Control-Max-Age': '600',
  });
  res.status(204).end();
};

/** Paths whose GET only reads, so HEAD may run it: `/`, health, discovery, the admin UI's files. */
const headSafePaths = /^\/(?:$|health$|\.well-known\/sync-host$|admin(?:\/(?!api(?:\/|$))|$))/;

/**
 * HEAD changes nothing anywhere. Express would answer HEAD with the GET handler (which may use
 * a link, hand out a pairing's token, count a rate limit or refresh lastSeen); here only
 * read-only paths get that. HEAD of a link is what a browser's GET shows: an HTML page, blank.
 * Everything else is 404, as any method a path does not serve.
 */
const headChangesNothing: RequestHandler = (req, res, next) => {
  if (req.method !== 'HEAD' || headSafePaths.test(req.path)) {
    next();
    return;
  }
  if (req.path === '/auth/verify') {
    res.set('Cache-Control', 'no-store').type('html').status(200).end();
    return;
  }
  // As for any other method a path does not serve (PUT, PATCH): no route.
  throw new AppError('not_found', `no route HEAD ${req.path}; use GET`);
};

/** The auth HTTP application: /, /health, /.well-known/sync-host, /auth/*, JSON errors. */
export function createAuthApp(options: AuthAppOptions): Express {
  const { service, logger } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('trust proxy', options.trustProxy?.length ? [...options.trustProxy] : false);

  // Every answer: no sniffing, never framed, no referrer; no content but what a page allows
  // (HTML pages and the admin UI replace this CSP with their own).
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
    next();
  });
  app.use(corsForApi);
  app.use(headChangesNothing);

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

  // The auth URL opened in a browser (a phone that scanned the admin UI's QR code, say).
  app.get('/', (_req, res) => {
    sendPage(res, 200, welcomePage(options.discovery().authUrl));
  });

  addAuthRoutes(app, service, {
    ready: (_req, _res, next) => {
      if (!options.isReady()) throw unavailable();
      next();
    },
    body: jsonBody,
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
