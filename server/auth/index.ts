import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Express } from 'express';
import { capConnectionsPerAddress } from '../address-cap.ts';
import type { AuthConfig } from '../config/auth-config.ts';
import type { ConnectionBudget } from '../connection-budget.ts';
import { type Db, openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrate.ts';
import { databaseMistake, isDatabaseUnavailable } from '../db/unavailable.ts';
import { closeServer, listen, slowClientLimits } from '../http-listen.ts';
import type { Logger } from '../log.ts';
import { version } from '../version.ts';
import { createAuthApp } from './app.ts';
import { startLinkPurge } from './link-purge.ts';
import { createDevMailer, createSmtpMailer } from './mail.ts';
import { type Purge, startRevocationPrune } from './purges.ts';
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
  /** HTTP timeouts (slowloris defence); the defaults suit production, tests shorten them. */
  httpTimeouts?: Partial<HttpTimeouts>;
  /** Open connections per client address (server/address-cap.ts). Default 64. */
  maxConnectionsPerAddress?: number;
  /**
   * The process's budget of untrusted connections (server/connection-budget.ts), shared with the
   * relay when co-hosted. Default: the auth port's own, half the descriptor limit.
   */
  connectionBudget?: ConnectionBudget;
}

/** Timeouts of the auth port's HTTP server. */
export interface HttpTimeouts {
  /** Time allowed to send the complete request headers. Default 10_000 ms. */
  headersMs: number;
  /** Time allowed to send the complete request, body included. Default 30_000 ms. */
  requestMs: number;
  /** How long an idle keep-alive connection stays open. Default 5_000 ms. */
  keepAliveMs: number;
}

/** Default of AuthServerOptions.retryMs. */
const migrateRetryMs = 2_000;
/**
 * Open connections per client address on the auth port: a browser opens up to six, a CLI one
 * or two; past it slow connections from one address would take the descriptors of everyone else.
 */
const defaultMaxConnectionsPerAddress = 64;
/** Headers read per request; the rest are dropped (a header flood costs nothing). */
const maxHeadersCount = 100;

export const defaultHttpTimeouts: HttpTimeouts = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 5_000,
};

const malformedBody = JSON.stringify({
  error: { code: 'invalid_request', message: 'malformed HTTP request' },
});
const malformedRequest = Buffer.from(
  `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(malformedBody)}\r\n\r\n${malformedBody}`,
);

/**
 * A request Node's HTTP parser refuses (bad framing, oversized headers) gets the API's
 * JSON 400 instead of Node's bare one; a client too slow to send its request (slowloris) is cut
 * without an answer. When the refused bytes follow a request whose answer is still being
 * prepared, that answer goes out first and the connection closes after it.
 */
function guardClientErrors(server: Server): void {
  const answering = new WeakMap<Duplex, ServerResponse>();
  // the latest response per socket; a finished one is told apart by writableFinished below
  // (no per-request 'finish' listener: the entry goes with the socket)
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    answering.set(req.socket, res);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A client too slow to send its request (slowloris) is cut, answer in preparation or not.
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const pending = answering.get(socket);
    if (pending !== undefined && !pending.writableFinished) {
      pending.shouldKeepAlive = false;
      pending.once('close', () => socket.destroy());
      return;
    }
    if (!socket.writable || (socket as Socket).bytesWritten > 0) {
      socket.destroy();
      return;
    }
    socket.end(malformedRequest);
  });
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
  setUrls(urls: { baseUrl: string; relayUrl: string; fingerprint?: string }): void;
  close(): Promise<void>;
}

/** Opens the database, prepares the schema, and builds the HTTP server of the auth service. */
export async function createAuthServer(options: AuthServerOptions): Promise<AuthServer> {
  const { config, logger } = options;
  const db = await openDatabase(config.db, { logger, sqliteEngine: options.sqliteEngine });
  const mailer = config.smtp
    ? createSmtpMailer(config.smtp, logger)
    : createDevMailer(options.print);
  // Not a fault: a home host without a mail server signs people in through what it shows.
  if (!config.smtp)
    logger.info(
      'e-mail sign-in links are shown here and in the admin UI (no SMTP configured; to send them by e-mail set SMTP_HOST in auth.conf, see docs/configuration.md)',
    );
  const urls = { baseUrl: options.urls?.baseUrl ?? '', relayUrl: options.urls?.relayUrl ?? '' };
  let fingerprint: string | undefined;
  const settings = {
    secret: options.secret,
    tokenSignature: config.tokenSignature,
    baseUrl: urls.baseUrl,
    defaultTier: config.defaultTier,
    signup: config.signup,
    allowedEmails: config.allowedEmails,
    deviceLimit: config.deviceLimit,
    ownerEmail: config.ownerEmail,
  };
  const service = createAuthService({
    db,
    mailer,
    logger,
    now: options.now,
    limits: options.limits,
    settings,
  });

  // close() ends the wait between two attempts at once (a stop during the retries is prompt).
  const state: SchemaState = { isReady: false, closed: false, closing: new AbortController() };
  const ready = prepareSchema(db, logger, options.retryMs ?? migrateRetryMs, state);

  const purges = startPurgesWhenReady(ready, state, { db, logger, now: options.now ?? Date.now });

  const app = createAuthApp({
    service,
    logger,
    isReady: () => state.isReady,
    discovery: () => ({
      authUrl: urls.baseUrl,
      relayUrl: urls.relayUrl,
      ...(fingerprint === undefined ? {} : { fingerprint }),
      version,
      smtp: config.smtp !== undefined,
    }),
    trustProxy: config.trustProxy,
    mount: options.mount && ((a) => options.mount?.(a, service, db)),
  });
  const server = createHttpServer(app, options);

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
      fingerprint = next.fingerprint;
      settings.baseUrl = next.baseUrl;
    },
    async close() {
      state.closed = true;
      state.closing.abort();
      for (const purge of purges) purge.stop();
      await closeServer(server);
      mailer.close();
      await ready.catch(() => {});
      await db.close();
    },
  };
}

/** Where the schema's preparation stands, and how a close ends its wait. */
interface SchemaState {
  isReady: boolean;
  closed: boolean;
  closing: AbortController;
}

/** The schema put in place, retried every `retryMs` while the database is unreachable. */
async function prepareSchema(
  db: Db,
  logger: Logger,
  retryMs: number,
  state: SchemaState,
): Promise<void> {
  for (;;) {
    try {
      const applied = await migrate(db);
      if (applied.length > 0)
        logger.info(
          { driver: db.driver, versions: applied },
          'database schema created or upgraded',
        );
      state.isReady = true;
      return;
    } catch (err: unknown) {
      // Refused credentials or a missing database are mistakes, not outages: no retry.
      if (!isDatabaseUnavailable(err) || databaseMistake(err) !== undefined || state.closed)
        throw err;
      logger.error({ err: (err as Error).message }, 'database unreachable at start; retrying');
      const retried = await sleep(retryMs, true, {
        signal: state.closing.signal,
      }).catch(() => false);
      if (!retried) throw new Error('closed while waiting for the database');
    }
  }
}

/**
 * Expired links and old revocations are deleted once the schema is in place (a failed start
 * is reported elsewhere); the purges are in the list returned, for the close to stop them.
 */
function startPurgesWhenReady(
  ready: Promise<void>,
  state: SchemaState,
  purgeOptions: { db: Db; logger: Logger; now: () => number },
): Purge[] {
  const purges: Purge[] = [];
  ready.then(
    () => {
      if (state.closed) return;
      purges.push(startLinkPurge(purgeOptions), startRevocationPrune(purgeOptions));
      // Once at start too: a process restarted more often than the interval still purges.
      for (const purge of purges) void purge.run();
    },
    () => {},
  );
  return purges;
}

/** The auth port's HTTP server: its timeouts, header count, client errors, connections per address. */
function createHttpServer(app: Express, options: AuthServerOptions): Server {
  const { config } = options;
  const timeouts = { ...defaultHttpTimeouts, ...options.httpTimeouts };
  const server = createServer(
    {
      ...slowClientLimits(timeouts.headersMs, timeouts.requestMs),
      keepAliveTimeout: timeouts.keepAliveMs,
    },
    app,
  );
  server.maxHeadersCount = maxHeadersCount;
  guardClientErrors(server);
  capConnectionsPerAddress(
    server,
    options.maxConnectionsPerAddress ?? defaultMaxConnectionsPerAddress,
    config.trustProxy,
    options.connectionBudget,
  );
  return server;
}
