import type { AuthService } from './auth/service.ts';
import { createNatsDeviceDirectory } from './cluster/nats-device-lookups.ts';
import { type NatsLink, openNatsLink } from './cluster/nats-link.ts';
import { createNatsRoomDirectory } from './cluster/nats-room-lookups.ts';
import { applyDeviceRevocations } from './cluster/revocation-wiring.ts';
import type { Revocation } from './cluster/revocations.ts';
import { ConfigError } from './config/conf-file.ts';
import { natsAccessOf } from './config/nats-access.ts';
import type { RelayConfig } from './config/relay-config.ts';
import type { Logger } from './log.ts';
import {
  AuthServiceClock,
  createAuthDirectory,
  createAuthRoomDirectory,
  type FeedTarget,
  followAuthFeed,
} from './relay/auth-feed.ts';
import { openFeedCursor } from './relay/feed-cursor.ts';
import type { DeviceDirectory } from './relay/stored-device-check.ts';
import type { RoomDirectory } from './store/room-directory.ts';

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
    logger.warn(
      mode === 'headless' || relay.authUrl !== undefined
        ? 'relay: djb2 device tokens are forgeable; joins are checked against the auth service’s devices, but prefer hmac-sha256 unless old clients need djb2'
        : 'relay: djb2 device tokens are forgeable; joins are checked against the auth processes over NATS (CLUSTER_NATS in their auth.conf; while none answers, signatures decide), but prefer hmac-sha256 unless old clients need djb2',
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

/** A relay's ways of learning of deleted devices (`revocationPaths`). */
export interface RevocationPaths {
  /** Where joins are checked; undefined: signatures alone. */
  devices: DeviceDirectory | undefined;
  /** A cluster node's: which rooms still have a project (asked over NATS); else undefined. */
  rooms: RoomDirectory | undefined;
  /**
   * Starts following the revocation paths of the relay (`cluster.nats`, and for a relay of its
   * own process the `auth.url` feed with its cursor beside relay.db); returns their stop functions.
   */
  follow(target: FeedTarget): Array<() => Promise<void>>;
}

/**
 * The revocation paths of a relay. Joins are checked against the auth database co-hosted, the
 * auth service with `auth.url`, or the auth processes over NATS with `cluster.nats` alone.
 */
export function revocationPaths(options: RevocationPathOptions): RevocationPaths {
  const { mode, relay, logger } = options;
  const now = options.now ?? Date.now;
  // one clock for the lookups and the feed of auth.url (moved once when the auth service's is far)
  const common = { secret: options.secret, logger, now, clock: new AuthServiceClock(now, logger) };
  let natsLink: NatsLink | undefined;
  let devices: DeviceDirectory | undefined;
  if (mode === 'headless') {
    devices = {
      lookup(deviceId) {
        const service = options.authService();
        return service === undefined
          ? Promise.reject(new Error('the auth database is not open yet'))
          : service.relayDevice(deviceId);
      },
    };
  } else if (relay.authUrl !== undefined) {
    devices = createAuthDirectory({ ...common, url: relay.authUrl });
  } else if (relay.clusterNats.length > 0) {
    devices = createNatsDeviceDirectory(() => natsLink, common);
  }
  return {
    devices,
    // A relay of its own process asks the auth side which rooms of its document store still
    // have a project: the auth service at auth.url, else the auth processes over the NATS link.
    rooms: mode !== 'relay' ? undefined : roomsOf(relay, common, () => natsLink),
    follow(target) {
      const stops: Array<() => Promise<void>> = [];
      if (relay.clusterNats.length > 0) {
        const link = openNatsLink(
          relay.clusterNats,
          'sync-host relay revocations',
          logger,
          natsAccessOf(relay),
        );
        natsLink = link;
        const apply = (revocation: Revocation) => {
          if ('deviceId' in revocation)
            target.revokeDevice(revocation.deviceId, revocation.revokedAt);
          else target.revokeMember(revocation);
        };
        // Stopped in reverse order: the follower first, then its link.
        const revocations = applyDeviceRevocations(
          link,
          relay.clusterNats,
          apply,
          logger,
          options.secret,
        );
        stops.push(() => link.close(), revocations);
      }
      if (mode === 'relay' && relay.authUrl !== undefined) {
        stops.push(
          followAuthFeed(
            { ...common, url: relay.authUrl },
            target,
            openFeedCursor(relay.sqlitePath, relay.authUrl, logger),
          ),
        );
      }
      return stops;
    },
  };
}

/** A relay of its own process: where its document store learns which rooms lost their project. */
function roomsOf(
  relay: RelayConfig,
  common: { secret: string; logger: Logger; now: () => number; clock: AuthServiceClock },
  link: () => NatsLink | undefined,
): RoomDirectory | undefined {
  if (relay.authUrl !== undefined)
    return createAuthRoomDirectory({ ...common, url: relay.authUrl });
  return relay.clusterNats.length > 0 ? createNatsRoomDirectory(link, common) : undefined;
}
