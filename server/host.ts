import type { Express } from 'express';
import { type AuthServer, createAuthServer } from './auth/index.ts';
import type { AuthLimits } from './auth/rate-limits.ts';
import type { AuthService } from './auth/service.ts';
import { checkNatsAtStart } from './cluster/nats-options.ts';
import { publishDeviceRevocations } from './cluster/revocation-wiring.ts';
import { type HostMode, relayConfigFor, relaySecret } from './config/host-config.ts';
import type { LoadedConfig } from './config/load.ts';
import { natsAccessOf } from './config/nats-access.ts';
import type { RelayConfig } from './config/relay-config.ts';
import { type ConnectionBudget, openConnectionBudget } from './connection-budget.ts';
import { type HostSecrets, prepareDataDir } from './data-dir.ts';
import { lockDataDir } from './data-lock.ts';
import type { Db } from './db/connect.ts';
import { chooseSqliteEngine, type SqliteEngine } from './db/sqlite-engine.ts';
import { advertise } from './discovery/advertise.ts';
import { lanAddress } from './lan.ts';
import type { Logger } from './log.ts';
import type { Relay } from './relay/relay.ts';
import { RelaySwitch } from './relay-switch.ts';
import {
  type RevocationPathOptions,
  revocationPaths,
  warnAboutRevocation,
} from './revocation-paths.ts';
import {
  databaseConfigError,
  StartAborted,
  sqliteOpenError,
  unlessAborted,
} from './start-errors.ts';
import { authDatabaseRooms } from './store/room-directory.ts';
import { type HostTls, prepareHostTls, relayTls } from './tls/host-tls.ts';
import { serveTls } from './tls/secure-port.ts';
import { version } from './version.ts';

export type { HostMode } from './config/host-config.ts';
export { StartAborted } from './start-errors.ts';

export interface HostOptions {
  mode: HostMode;
  config: LoadedConfig;
  logger: Logger;
  /** User-facing stdout lines (URLs, dev-mode magic links). */
  print: (line: string) => void;
  now?: () => number;
  limits?: Partial<AuthLimits>;
  sqliteEngine?: 'native' | 'wasm';
  /**
   * Aborts the start (SIGINT/SIGTERM while the database is still unreachable): startHost closes
   * what it opened and rejects with StartAborted.
   */
  signal?: AbortSignal;
  /** Extra routes on the auth port (admin API and UI). */
  mount?: (app: Express, service: AuthService, db: Db, host: () => Host) => void;
}

export interface HostUrls {
  auth?: string;
  relay?: string;
  status?: string;
  admin?: string;
}

export interface Host {
  urls: HostUrls;
  adminToken: string;
  /** The file that keeps the admin token, and whether this start created it. */
  adminTokenFile: { path: string; created: boolean };
  auth?: AuthServer;
  /** The running relay; undefined in `auth` mode and while paused. */
  readonly relay?: Relay;
  /** Whether the relay is stopped by pauseRelay (tray app) and may be resumed. */
  readonly relayPaused: boolean;
  /** Whether this host advertises itself on the LAN by mDNS (MDNS in auth.conf). */
  mdns: boolean;
  /** The certificate's fingerprint (SHA-256 of its public key, base64url); undefined without TLS. */
  fingerprint?: string;
  /** Whether the auth port speaks TLS (https://). */
  authTls?: boolean;
  /** Closes the relay (clients get 1001 and reconnect later); a no-op without a running relay. */
  pauseRelay(): Promise<void>;
  /** Starts the relay again on the same ports after pauseRelay. */
  resumeRelay(): Promise<void>;
  close(): Promise<void>;
}

/** What the parts of a start share: what is open so far, and what closes it. */
interface Starting {
  options: HostOptions;
  relayConfig: RelayConfig;
  host: Host;
  /** What `close()` runs, in reverse. */
  stops: Array<() => Promise<void>>;
  relay: RelaySwitch;
  revocation: ReturnType<typeof revocationPaths>;
  authTls: HostTls | undefined;
  wsTls: HostTls | undefined;
  secret: string;
  adminToken: string;
  sqliteEngine: SqliteEngine | undefined;
  /** One budget of untrusted connections for every port of the process. */
  connectionBudget: ConnectionBudget;
  /** Co-hosted, the relay checks joins against this auth service once it is open. */
  setAuthService(service: AuthService): void;
}

/**
 * Starts the services of a mode: auth + relay (`headless`), or one of them. Creates the data
 * folder with its secret and admin token on first start. `close()` stops everything.
 */
export async function startHost(options: HostOptions): Promise<Host> {
  const { config, logger, mode } = options;
  const relayConfig = relayConfigFor(mode, config);
  await checkNatsOfMode(options, relayConfig);
  // One SQLite engine for the relay buffer and an embedded auth database (sql.js when the
  // native addon cannot load), announced once.
  const sqliteEngine =
    mode !== 'auth' || config.auth.db.driver === 'sqlite'
      ? await chooseSqliteEngine(options.sqliteEngine, logger)
      : options.sqliteEngine;
  const generated = prepareDataDir(config.auth.dataDir);
  // Released last at close (the stops run in reverse).
  const lock = lockDataDir(config.auth.dataDir, mode === 'headless' ? ['auth', 'relay'] : [mode]);
  const secret = config.auth.authSecret ?? generated.secret;
  // one budget of untrusted connections for every port of the process
  const connectionBudget = openConnectionBudget(logger);
  const stops: Array<() => Promise<void>> = [async () => lock.release()];
  // The certificate of the auth port, and co-hosted of the relay port too (TLS=off: none).
  const authTls =
    mode === 'relay'
      ? undefined
      : await prepareHostTls({ mode, config: config.auth, logger, now: options.now });
  if (authTls) stops.push(async () => authTls.stop());
  const wsTls = mode === 'auth' ? undefined : relayTls(config.relay, authTls);
  // Co-hosted, joins are checked against the auth database once it is open (until then, and
  // while it is unreachable, the cache and the signature decide).
  let authService: AuthService | undefined;
  const paths: RevocationPathOptions = {
    mode,
    relay: relayConfig,
    // Asked once (it warns when relay.conf's secret differs); an auth process has no relay.
    secret: mode === 'auth' ? secret : relaySecret(mode, config, secret, logger),
    logger,
    now: options.now,
    authService: () => authService,
  };
  const revocation = revocationPaths(paths);
  const relay = new RelaySwitch({
    config: relayConfig,
    secret: paths.secret,
    logger,
    now: options.now,
    devices: revocation.devices,
    tls: wsTls,
    // The document store forgets the rooms of deleted projects: co-hosted it asks the auth
    // database, a cluster node the auth processes over NATS.
    rooms: mode === 'headless' ? authDatabaseRooms(() => host.auth?.db) : revocation.rooms,
    connectionBudget,
  });
  const host = hostOf({ relay, stops, logger, generated, authTls, wsTls });
  const starting: Starting = {
    options,
    relayConfig,
    host,
    stops,
    relay,
    revocation,
    authTls,
    wsTls,
    secret,
    adminToken: generated.adminToken,
    sqliteEngine,
    connectionBudget,
    setAuthService: (service) => {
      authService = service;
    },
  };
  try {
    if (mode !== 'auth') await startRelay(starting);
    if (mode !== 'relay') await startAuth(starting);
  } catch (err: unknown) {
    await host.close();
    throw err;
  }
  return host;
}

/** A cluster process refuses a NATS that lets anyone in (before anything is opened). */
async function checkNatsOfMode(options: HostOptions, relayConfig: RelayConfig): Promise<void> {
  const { config, logger, mode } = options;
  if (mode !== 'auth') {
    await checkNatsAtStart(
      relayConfig.clusterNats,
      natsAccessOf(relayConfig),
      'relay.conf',
      logger,
    );
  }
  if (mode !== 'relay') {
    await checkNatsAtStart(config.auth.clusterNats, natsAccessOf(config.auth), 'auth.conf', logger);
  }
}

/** The host as its caller holds it; `close()` runs the stops in reverse, each logged if it fails. */
function hostOf(parts: {
  relay: RelaySwitch;
  stops: Array<() => Promise<void>>;
  logger: Logger;
  generated: HostSecrets;
  authTls: HostTls | undefined;
  wsTls: HostTls | undefined;
}): Host {
  const { relay, stops, logger, generated, authTls, wsTls } = parts;
  return {
    urls: {},
    adminToken: generated.adminToken,
    adminTokenFile: generated.adminTokenFile,
    get relay() {
      return relay.relay;
    },
    get relayPaused() {
      return relay.paused;
    },
    mdns: false,
    fingerprint: authTls?.fingerprint ?? wsTls?.fingerprint,
    authTls: authTls !== undefined,
    pauseRelay: () => relay.pause(),
    resumeRelay: () => relay.resume(),
    async close() {
      for (const stop of stops.reverse()) {
        await stop().catch((err: unknown) =>
          logger.error(
            { err: err instanceof Error ? err.message : String(err) },
            'error during shutdown',
          ),
        );
      }
    },
  };
}

/** The relay's ports, with the revocations it follows. */
async function startRelay(starting: Starting): Promise<void> {
  const { relay, relayConfig, stops, revocation, wsTls, host } = starting;
  const { mode, logger } = starting.options;
  const urls = host.urls;
  stops.push(() => relay.close());
  warnAboutRevocation(mode, relayConfig, logger);
  stops.push(
    ...revocation.follow({
      revokeDevice: (deviceId, revokedAt) => relay.revoke(deviceId, revokedAt),
      revokeMember: (member) => relay.revokeMember(member),
      recheckDevices: async () => relay.relay?.recheckDevices(),
    }),
  );
  const ports = await relay.start();
  const relayLan = lanAddress(relayConfig.bind);
  urls.relay = `${wsTls ? 'wss' : 'ws'}://${relayLan}:${ports.wsPort}`;
  urls.status = `http://${relayLan}:${ports.statusPort}`;
}

/**
 * The auth service on its port: its URLs, its revocations to the relay (co-hosted, or over NATS
 * to a cluster), the wait for its database, and its mDNS record.
 */
async function startAuth(starting: Starting): Promise<void> {
  const { options, host, stops, relay, authTls, secret } = starting;
  const { config, logger, mode } = options;
  const auth = await createAuthServer({
    config: config.auth,
    secret,
    logger,
    print: options.print,
    now: options.now,
    limits: options.limits,
    sqliteEngine: starting.sqliteEngine,
    connectionBudget: starting.connectionBudget,
    mount: options.mount && ((app, service, db) => options.mount?.(app, service, db, () => host)),
  }).catch((err: unknown) => {
    throw sqliteOpenError(err, config.auth.db);
  });
  stops.push(() => auth.close());
  host.auth = auth;
  starting.setAuthService(auth.service);
  if (config.auth.clusterNats.length > 0) stops.push(publishRevocations(options, auth, secret));
  if (authTls) serveTls(auth.server, authTls);
  const { port, baseUrl, relayUrl } = await listenAuth(starting, auth);
  if (mode === 'headless') {
    auth.service.onDeviceRevoked((deviceId) => relay.revoke(deviceId, undefined));
    auth.service.onMembersRemoved((members) => {
      for (const member of members) relay.revokeMember(member);
    });
  }
  // The wait for an unreachable database ends early when the start is aborted.
  await unlessAborted(auth.ready, options.signal).catch((err: unknown) => {
    throw err instanceof StartAborted ? err : databaseConfigError(err, config.auth.db);
  });
  if (mode === 'headless') {
    // relay.db may be new or replaced: the ended memberships come from the auth database
    const ended = await auth.service.memberRevocations().catch((err: unknown) => {
      logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'relay: ended memberships not read from the auth database; relay.db decides',
      );
      return [];
    });
    for (const member of ended) relay.revokeMember(member);
  }
  if (config.auth.mdns) {
    const advertisement = advertise({
      port,
      txt: {
        auth: baseUrl,
        relay: relayUrl,
        version,
        ...(host.fingerprint ? { fp: host.fingerprint } : {}),
      },
      logger,
    });
    stops.push(() => advertisement.stop());
    host.mdns = true;
  }
}

/** An auth process of a cluster tells every relay node its revocations over NATS. */
function publishRevocations(options: HostOptions, auth: AuthServer, secret: string) {
  const { config, logger } = options;
  return publishDeviceRevocations(config.auth.clusterNats, {
    onDeviceRevoked: (listener) => auth.service.onDeviceRevoked(listener),
    onMembersRemoved: (listener) => auth.service.onMembersRemoved(listener),
    relayDevice: (deviceId) => auth.service.relayDevice(deviceId),
    rooms: authDatabaseRooms(() => auth.db),
    secret,
    access: natsAccessOf(config.auth),
    logger,
    now: options.now ?? Date.now,
  });
}

/** The auth port listening, and the URLs it gives out (its own, the relay's, the admin UI's). */
async function listenAuth(
  starting: Starting,
  auth: AuthServer,
): Promise<{ port: number; baseUrl: string; relayUrl: string }> {
  const { options, host, authTls } = starting;
  const { config } = options;
  const urls = host.urls;
  const lan = lanAddress(config.auth.bind);
  const port = await auth.listen();
  const scheme = authTls ? 'https' : 'http';
  const baseUrl = config.auth.authBaseUrl ?? `${scheme}://${lan}:${port}`;
  const relayUrl =
    config.auth.relayUrl ??
    urls.relay ??
    `${authTls ? 'wss' : 'ws'}://${lan}:${config.relay.wsPort}`;
  auth.setUrls({ baseUrl, relayUrl, fingerprint: host.fingerprint });
  urls.auth = baseUrl;
  urls.relay = relayUrl;
  urls.admin = `${baseUrl}/admin/#token=${starting.adminToken}`;
  return { port, baseUrl, relayUrl };
}
