import type { Logger } from '../log.ts';
import type { LoadedConfig } from './load.ts';
import type { RelayConfig } from './relay-config.ts';

/** The host's modes: auth and relay in one process (`headless`), or one of them. */
export type HostMode = 'headless' | 'auth' | 'relay';

/**
 * The relay's effective configuration in `mode`: co-hosted (`headless`), relay.conf inherits
 * from auth.conf what it does not set itself.
 */
export function relayConfigFor(mode: HostMode, config: LoadedConfig): RelayConfig {
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
  return relayConfig;
}

/** The relay's secret: relay.conf's when set, else the auth service's (with a warning when they differ). */
export function relaySecret(
  mode: HostMode,
  config: LoadedConfig,
  authSecret: string,
  logger: Logger,
): string {
  const { relay } = config;
  if (relay.secret === undefined || mode === 'relay') return relay.secret ?? authSecret;
  if (relay.secret !== authSecret) {
    logger.warn(
      'relay.conf auth.secret differs from the auth service secret: devices will fail to authenticate with the relay',
    );
  }
  return relay.secret;
}
