import { hostname } from 'node:os';
import type { Express } from 'express';
import { type AuthServer, createAuthServer } from './auth/index.ts';
import type { AuthLimits } from './auth/rate-limits.ts';
import type { AuthService } from './auth/service.ts';
import { createClusterBroker } from './cluster/cluster-broker.ts';
import { publishDeviceRevocations } from './cluster/revocation-wiring.ts';
import type { DbConfig } from './config/auth-config.ts';
import { ConfigError } from './config/conf-file.ts';
import type { LoadedConfig } from './config/load.ts';
import type { RelayConfig } from './config/relay-config.ts';
import { prepareDataDir } from './data-dir.ts';
import type { Db } from './db/connect.ts';
import { chooseSqliteEngine } from './db/sqlite-engine.ts';
import { databaseMistake } from './db/unavailable.ts';
import { advertise } from './discovery/advertise.ts';
import { ListenError } from './http-listen.ts';
import { lanAddress } from './lan.ts';
import type { Logger } from './log.ts';
import { createRelay, type Relay } from './relay/relay.ts';
import {
  type RevocationPathOptions,
  revocationPaths,
  warnAboutRevocation,
} from './revocation-paths.ts';
import { prepareHostTls, relayTls } from './tls/host-tls.ts';
import { serveTls } from './tls/secure-port.ts';
import { version } from './version.ts';

export type HostMode = 'headless' | 'auth' | 'relay';

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
  auth?: AuthServer;
  /** The running relay; undefined in `auth` mode and while paused. */
  relay?: Relay;
  /** Whether the relay is stopped by pauseRelay (tray app) and may be resumed. */
  relayPaused: boolean;
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

/** startHost was stopped by its signal before the host was up; everything opened is closed. */
export class StartAborted extends Error {
  constructor() {
    super('stopped while starting');
    this.name = 'StartAborted';
  }
}

/** `promise`, or StartAborted as soon as `signal` aborts (the promise is left to settle). */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(new StartAborted());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new StartAborted());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A relay port that cannot be opened becomes a ListenError naming the relay.conf key. */
function relayListenError(err: unknown, config: RelayConfig): unknown {
  const e = err as NodeJS.ErrnoException & { port?: unknown };
  if (typeof e?.code !== 'string' || !['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL'].includes(e.code))
    return err;
  const port = typeof e.port === 'number' ? e.port : config.wsPort;
  const setting =
    port === config.statusPort && port !== config.wsPort
      ? 'status.port in relay.conf'
      : 'ws.port in relay.conf';
  return new ListenError(port, setting, e.code);
}

/** The relay's SQLite buffer cannot be opened: a configuration mistake naming sqlite.path. */
function bufferOpenError(err: unknown, config: RelayConfig): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^(SQLITE_|E[A-Z]+$)/.test(code)) return err;
  return new ConfigError(
    'relay.conf',
    undefined,
    'sqlite.path',
    `cannot open ${config.sqlitePath} (${code})`,
  );
}

/** The embedded auth database cannot be opened: a configuration mistake naming DB_PATH. */
function sqliteOpenError(err: unknown, db: DbConfig): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (db.driver !== 'sqlite' || typeof code !== 'string' || !/^(SQLITE_|E[A-Z]+$)/.test(code)) {
    return err;
  }
  return new ConfigError('auth.conf', undefined, 'DB_PATH', `cannot open ${db.path} (${code})`);
}

/** The database refused the credentials or has no such database: a mistake naming the keys. */
function databaseConfigError(err: unknown, db: DbConfig): unknown {
  const keys = databaseMistake(err);
  if (keys === undefined || db.driver === 'sqlite') return err;
  const server = `${db.driver} at ${db.host}:${db.port}`;
  const problem =
    keys === 'DB_NAME'
      ? `${server} has no database "${db.database}"`
      : `${server} refused the credentials of user "${db.user}"`;
  const detail = err instanceof Error ? ` (${err.message})` : '';
  return new ConfigError('auth.conf', undefined, keys, `${problem}${detail}`);
}

/** The relay's secret: relay.conf's when set, else the auth service's (with a warning when they differ). */
function relaySecret(options: HostOptions, authSecret: string): string {
  const { relay } = options.config;
  if (relay.secret === undefined || options.mode === 'relay') return relay.secret ?? authSecret;
  if (relay.secret !== authSecret) {
    options.logger.warn(
      'relay.conf auth.secret differs from the auth service secret: devices will fail to authenticate with the relay',
    );
  }
  return relay.secret;
}

/**
 * Starts the services of a mode: auth + relay (`headless`), or one of them. Creates the data
 * folder with its secret and admin token on first start. `close()` stops everything.
 */
export async function startHost(options: HostOptions): Promise<Host> {
  const { config, logger, mode } = options;
  // One SQLite engine for the relay buffer and an embedded auth database (sql.js when the
  // native addon cannot load), announced once.
  const sqliteEngine =
    mode !== 'auth' || config.auth.db.driver === 'sqlite'
      ? await chooseSqliteEngine(options.sqliteEngine, logger)
      : options.sqliteEngine;
  const generated = prepareDataDir(config.auth.dataDir);
  const secret = config.auth.authSecret ?? generated.secret;
  const lan = lanAddress(config.auth.bind);
  const urls: HostUrls = {};
  const stops: Array<() => Promise<void>> = [];
  // The certificate of the auth port, and co-hosted of the relay port too (TLS=off: none).
  const authTls =
    mode === 'relay'
      ? undefined
      : await prepareHostTls({ mode, config: config.auth, logger, now: options.now });
  if (authTls) stops.push(async () => authTls.stop());
  const wsTls = mode === 'auth' ? undefined : relayTls(config.relay, authTls);
  let relayPorts: { wsPort: number; statusPort: number } | undefined;
  const relayConfig = { ...config.relay };
  if (mode === 'headless' && !relayConfig.explicit.has('tokenSignature')) {
    relayConfig.tokenSignature = config.auth.tokenSignature;
  }
  // BIND is the listen address of every port unless relay.conf sets its own.
  if (mode === 'headless' && !relayConfig.explicit.has('bind')) relayConfig.bind = config.auth.bind;
  // TRUST_PROXY names the proxies in front of every port unless relay.conf names its own.
  if (mode === 'headless' && !relayConfig.explicit.has('trustProxy')) {
    relayConfig.trustProxy = config.auth.trustProxy;
  }
  // Devices deleted while the relay is paused: replayed into the relay when it resumes.
  const revokedWhilePaused = new Set<number>();
  const applyRevocation = (deviceId: number, revokedAt?: number) => {
    if (host.relay) host.relay.revokeDevice(deviceId, revokedAt);
    else if (host.relayPaused) revokedWhilePaused.add(deviceId);
  };
  // Co-hosted, joins are checked against the auth database once it is open (until then, and
  // while it is unreachable, the cache and the signature decide).
  let authService: AuthService | undefined;
  const paths: RevocationPathOptions = {
    mode,
    relay: relayConfig,
    // Asked once (it warns when relay.conf's secret differs); an auth process has no relay.
    secret: mode === 'auth' ? secret : relaySecret(options, secret),
    logger,
    now: options.now,
    authService: () => authService,
  };
  const revocation = revocationPaths(paths);
  const devices = revocation.devices;
  const startRelay = async (ports?: { wsPort: number; statusPort: number }) => {
    let relay: Relay;
    try {
      relay = createRelay({
        config: ports ? { ...relayConfig, ...ports } : relayConfig,
        secret: paths.secret,
        logger,
        now: options.now,
        devices,
        tls: wsTls,
        broker:
          relayConfig.clusterNats.length > 0
            ? createClusterBroker({
                urls: relayConfig.clusterNats,
                node: relayConfig.clusterNode ?? `${hostname()}:${relayConfig.wsPort}`,
                bufferWindowMs: relayConfig.bufferSeconds * 1000,
                logger,
                now: options.now,
              })
            : undefined,
      });
    } catch (err: unknown) {
      throw bufferOpenError(err, relayConfig);
    }
    for (const deviceId of revokedWhilePaused) relay.revokeDevice(deviceId);
    revokedWhilePaused.clear();
    host.relay = relay;
    try {
      relayPorts = await relay.listen();
    } catch (err: unknown) {
      host.relay = undefined;
      await relay.close();
      throw relayListenError(err, relayConfig);
    }
    return relayPorts;
  };
  const host: Host = {
    urls,
    adminToken: generated.adminToken,
    relayPaused: false,
    mdns: false,
    fingerprint: authTls?.fingerprint ?? wsTls?.fingerprint,
    authTls: authTls !== undefined,
    async pauseRelay() {
      const relay = host.relay;
      if (relay === undefined) return;
      host.relay = undefined;
      host.relayPaused = true;
      await relay.close();
      logger.info('relay paused');
    },
    async resumeRelay() {
      if (!host.relayPaused || host.relay !== undefined) return;
      await startRelay(relayPorts);
      host.relayPaused = false;
      logger.info('relay resumed');
    },
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

  try {
    if (mode !== 'auth') {
      stops.push(async () => {
        host.relayPaused = false;
        await host.relay?.close();
      });
      warnAboutRevocation(mode, relayConfig, logger);
      stops.push(
        ...revocation.follow({
          revokeDevice: applyRevocation,
          recheckDevices: async () => host.relay?.recheckDevices(),
        }),
      );
      const ports = await startRelay();
      const relayLan = lanAddress(relayConfig.bind);
      urls.relay = `${wsTls ? 'wss' : 'ws'}://${relayLan}:${ports.wsPort}`;
      urls.status = `http://${relayLan}:${ports.statusPort}`;
    }
    if (mode !== 'relay') {
      const auth = await createAuthServer({
        config: config.auth,
        secret,
        logger,
        print: options.print,
        now: options.now,
        limits: options.limits,
        sqliteEngine,
        mount:
          options.mount && ((app, service, db) => options.mount?.(app, service, db, () => host)),
      }).catch((err: unknown) => {
        throw sqliteOpenError(err, config.auth.db);
      });
      stops.push(() => auth.close());
      host.auth = auth;
      authService = auth.service;
      if (config.auth.clusterNats.length > 0) {
        stops.push(
          publishDeviceRevocations(config.auth.clusterNats, {
            onDeviceRevoked: (listener) => auth.service.onDeviceRevoked(listener),
            relayDevice: (deviceId) => auth.service.relayDevice(deviceId),
            secret,
            logger,
            now: options.now ?? Date.now,
          }),
        );
      }
      if (authTls) serveTls(auth.server, authTls);
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
      urls.admin = `${baseUrl}/admin/#token=${generated.adminToken}`;
      if (mode === 'headless') {
        auth.service.onDeviceRevoked((deviceId) => applyRevocation(deviceId));
      }
      // The wait for an unreachable database ends early when the start is aborted.
      await unlessAborted(auth.ready, options.signal).catch((err: unknown) => {
        throw err instanceof StartAborted ? err : databaseConfigError(err, config.auth.db);
      });
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
  } catch (err: unknown) {
    await host.close();
    throw err;
  }
  return host;
}
