import type { Express } from 'express';
import type { LoadedConfig } from './config/load.ts';
import { prepareDataDir } from './data-dir.ts';
import type { Db } from './db/connect.ts';
import { type AuthServer, createAuthServer } from './auth/index.ts';
import type { AuthLimits } from './auth/rate-limits.ts';
import type { AuthService } from './auth/service.ts';
import { lanAddress } from './lan.ts';
import type { Logger } from './log.ts';
import { createRelay, type Relay } from './relay/index.ts';

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
  relay?: Relay;
  close(): Promise<void>;
}

/** The relay's secret: relay.conf's when set, else the auth service's (with a warning when they differ). */
function relaySecret(options: HostOptions, authSecret: string): string {
  const { relay } = options.config;
  if (relay.secret === undefined || options.mode === 'relay') return relay.secret ?? authSecret;
  if (relay.secret !== authSecret) {
    options.logger.warn('relay.conf auth.secret differs from the auth service secret: devices will fail to authenticate with the relay');
  }
  return relay.secret;
}

/**
 * Starts the services of a mode: auth + relay (`headless`), or one of them. Creates the data
 * folder with its secret and admin token on first start. `close()` stops everything.
 */
export async function startHost(options: HostOptions): Promise<Host> {
  const { config, logger, mode } = options;
  const generated = prepareDataDir(config.auth.dataDir);
  const secret = config.auth.authSecret ?? generated.secret;
  const lan = lanAddress(config.auth.bind);
  const urls: HostUrls = {};
  const stops: Array<() => Promise<void>> = [];
  const host: Host = {
    urls,
    adminToken: generated.adminToken,
    async close() {
      for (const stop of stops.reverse()) {
        await stop().catch((err: unknown) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'error during shutdown'));
      }
    },
  };

  try {
    if (mode !== 'auth') {
      const relayConfig = { ...config.relay };
      if (mode === 'headless' && !relayConfig.explicit.has('auth.tokenSignature')) {
        relayConfig.tokenSignature = config.auth.tokenSignature;
      }
      const relay = createRelay({ config: relayConfig, secret: relaySecret(options, secret), logger, now: options.now });
      stops.push(() => relay.close());
      const ports = await relay.listen();
      const relayLan = lanAddress(relayConfig.bind);
      urls.relay = `ws://${relayLan}:${ports.wsPort}`;
      urls.status = `http://${relayLan}:${ports.statusPort}`;
      host.relay = relay;
    }
    if (mode !== 'relay') {
      const auth = await createAuthServer({
        config: config.auth,
        secret,
        logger,
        print: options.print,
        now: options.now,
        limits: options.limits,
        sqliteEngine: options.sqliteEngine,
        mount: options.mount && ((app, service, db) => options.mount?.(app, service, db, () => host)),
      });
      stops.push(() => auth.close());
      host.auth = auth;
      const port = await auth.listen();
      const baseUrl = config.auth.authBaseUrl ?? `http://${lan}:${port}`;
      const relayUrl = config.auth.relayUrl ?? urls.relay ?? `ws://${lan}:${config.relay.wsPort}`;
      auth.setUrls({ baseUrl, relayUrl });
      urls.auth = baseUrl;
      urls.relay = relayUrl;
      urls.admin = `${baseUrl}/admin/#token=${generated.adminToken}`;
      if (host.relay) {
        const relay = host.relay;
        auth.service.onDeviceRevoked((deviceId) => relay.revokeDevice(deviceId));
      }
      await auth.ready;
    }
  } catch (err: unknown) {
    await host.close();
    throw err;
  }
  return host;
}
