import type { AuthService } from './auth/service.ts';
import { applyDeviceRevocations } from './cluster/revocation-wiring.ts';
import { ConfigError } from './config/conf-file.ts';
import type { RelayConfig } from './config/relay-config.ts';
import type { Logger } from './log.ts';
import { createAuthDirectory, type FeedTarget, followAuthFeed } from './relay/auth-feed.ts';
import type { DeviceDirectory } from './relay/device-check.ts';
import { openFeedCursor } from './relay/feed-cursor.ts';

type Mode = 'headless' | 'auth' | 'relay';

/**
 * How deleted devices reach this relay, said at start: without a way (co-hosting, `auth.url` or
 * `cluster.nats`) a deleted device keeps its relay access, and djb2 tokens, which anyone holding
 * one can forge, are refused as a configuration mistake.
 */
export function warnAboutRevocation(mode: Mode, relay: RelayConfig, logger: Logger): void {
  const path = mode === 'headless' || relay.authUrl !== undefined || relay.clusterNats.length > 0;
  if (!path && relay.tokenSignature === 'djb2') {
    throw new ConfigError(
      'relay.conf',
      undefined,
      'auth.tokenSignature',
      'djb2 tokens can be forged, so the relay accepts them only when it learns of deleted devices: set auth.url (the auth service URL) or cluster.nats',
    );
  }
  if (!path) {
    logger.warn(
      'relay: no revocation path (auth.url or cluster.nats in relay.conf): deleted devices keep relay access',
    );
  } else if (relay.tokenSignature === 'djb2') {
    const checked = mode === 'headless' || relay.authUrl !== undefined;
    logger.warn(
      checked
        ? 'relay: djb2 device tokens are forgeable; joins are checked against the auth service’s devices, but prefer hmac-sha256 unless old clients need djb2'
        : 'relay: djb2 device tokens are forgeable and only deleted devices are refused (cluster.nats); set auth.url too, or prefer hmac-sha256',
    );
  }
}

export interface RevocationPathOptions {
  mode: Mode;
  relay: RelayConfig;
  /** The relay's effective secret (the feed's credential is made from it). */
  secret: string;
  logger: Logger;
  now?: () => number;
  /** Co-hosted: the auth service, once its database is open. */
  authService: () => AuthService | undefined;
}

/**
 * Where joins are checked: the auth database co-hosted, the auth service with `auth.url`;
 * undefined (signatures alone) otherwise.
 */
export function relayDeviceDirectory(options: RevocationPathOptions): DeviceDirectory | undefined {
  const { mode, relay } = options;
  if (mode === 'headless') {
    return {
      lookup(deviceId) {
        const service = options.authService();
        return service === undefined
          ? Promise.reject(new Error('the auth database is not open yet'))
          : service.relayDevice(deviceId);
      },
    };
  }
  if (relay.authUrl === undefined) return undefined;
  return createAuthDirectory({ ...authFeedOptions(options), url: relay.authUrl });
}

function authFeedOptions(options: RevocationPathOptions) {
  return { secret: options.secret, logger: options.logger, now: options.now };
}

/**
 * Starts following the revocation paths of a relay of its own process (`cluster.nats`, the
 * `auth.url` feed with its cursor beside relay.db); returns their stop functions.
 */
export function followRevocationPaths(
  options: RevocationPathOptions,
  target: FeedTarget,
): Array<() => Promise<void>> {
  const { mode, relay, logger } = options;
  const stops: Array<() => Promise<void>> = [];
  if (relay.clusterNats.length > 0) {
    stops.push(
      applyDeviceRevocations(
        relay.clusterNats,
        ({ deviceId, revokedAt }) => target.revokeDevice(deviceId, revokedAt),
        logger,
      ),
    );
  }
  if (mode === 'relay' && relay.authUrl !== undefined) {
    stops.push(
      followAuthFeed(
        { ...authFeedOptions(options), url: relay.authUrl },
        target,
        openFeedCursor(relay.sqlitePath, relay.authUrl, logger),
      ),
    );
  }
  return stops;
}
