import type { Logger } from '../log.ts';
import { openNatsLink } from './nats-link.ts';
import { createRevocationPublisher, followRevocations, type Revocation } from './revocations.ts';

/** Something that closes a device's connections (the running relay, or a queue while paused). */
export type ApplyRevocation = (revocation: Revocation) => void;

/** An auth process publishes every device deletion to NATS; returns the stop function. */
export function publishDeviceRevocations(
  urls: readonly string[],
  onDeviceRevoked: (listener: (deviceId: number) => void) => unknown,
  now: () => number,
  logger: Logger,
): () => Promise<void> {
  const link = openNatsLink(urls, 'sync-host auth', logger);
  const publisher = createRevocationPublisher(link, logger);
  onDeviceRevoked((deviceId) =>
    publisher.publish({ deviceId, revokedAt: Math.floor(now() / 1000) }),
  );
  return () => link.close();
}

/** A relay process applies every revocation published on NATS; returns the stop function. */
export function applyDeviceRevocations(
  urls: readonly string[],
  apply: ApplyRevocation,
  logger: Logger,
): () => Promise<void> {
  const link = openNatsLink(urls, 'sync-host relay revocations', logger);
  const follower = followRevocations(link, apply, logger);
  return async () => {
    follower.stop();
    await link.close();
  };
}
