import type { MemberRevocation } from '../../protocol/room-grant.ts';
import type { NatsAccess } from '../config/nats-access.ts';
import type { Logger } from '../log.ts';
import type { DeviceRecord } from '../relay/stored-device-check.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import { answerDeviceChecks, type DeviceCheckOptions } from './nats-device-lookups.ts';
import { type NatsLink, openNatsLink, replicasFor } from './nats-link.ts';
import { answerRoomChecks } from './nats-room-lookups.ts';
import { recordSealFor } from './record-seal.ts';
import { createRevocationPublisher, followRevocations, type Revocation } from './revocations.ts';

/** Something that closes a device's connections (the running relay, or a queue while paused). */
export type ApplyRevocation = (revocation: Revocation) => void;

/** What an auth process with `CLUSTER_NATS` offers the cluster nodes. */
export interface AuthOnNats extends DeviceCheckOptions {
  onDeviceRevoked: (listener: (deviceId: number) => void) => unknown;
  /** Memberships that ended (teams), published like deleted devices. */
  onMembersRemoved?: (listener: (members: readonly MemberRevocation[]) => void) => unknown;
  /** The device's record for a join check (the auth database); undefined when gone. */
  relayDevice: (deviceId: number) => Promise<DeviceRecord | undefined>;
  /** Credentials and CA for NATS (`CLUSTER_USER`...). */
  access?: NatsAccess;
  /** Which rooms still have a project (the auth database), for the nodes' document store. */
  rooms?: RoomDirectory;
}

/**
 * An auth process publishes every device deletion and ended membership to NATS and answers the nodes' device checks
 * and room checks; returns the stop function.
 */
export function publishDeviceRevocations(
  urls: readonly string[],
  auth: AuthOnNats,
): () => Promise<void> {
  const { logger, now } = auth;
  const link = openNatsLink(urls, 'sync-host auth', logger, auth.access);
  const seal = recordSealFor(auth.secret, logger);
  const publisher = createRevocationPublisher(link, replicasFor(urls), logger, seal);
  auth.onDeviceRevoked((deviceId) =>
    publisher.publish({ deviceId, revokedAt: Math.floor(now() / 1000) }),
  );
  auth.onMembersRemoved?.((members) => {
    for (const member of members) publisher.publish(member);
  });
  const checks = answerDeviceChecks(link, auth.relayDevice, auth);
  const roomChecks = auth.rooms && answerRoomChecks(link, auth.rooms, auth);
  return async () => {
    checks.stop();
    roomChecks?.stop();
    await link.close();
  };
}

/**
 * A relay process applies every revocation published on NATS through `link` (opened by the
 * caller on `urls`, who closes it); returns the stop function.
 */
export function applyDeviceRevocations(
  link: NatsLink,
  urls: readonly string[],
  apply: ApplyRevocation,
  logger: Logger,
  secret: string,
): () => Promise<void> {
  const seal = recordSealFor(secret, logger);
  const follower = followRevocations(link, replicasFor(urls), apply, logger, seal);
  return async () => follower.stop();
}
