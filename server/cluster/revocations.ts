import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { NatsLink } from './nats-link.ts';

/**
 * Deleted devices, one key per device id holding `{"revokedAt":<unix s>}`. A KV bucket (a
 * JetStream stream) rather than plain messages, so that a relay node that was away (restarted,
 * cut off from NATS) reads every revocation it missed when it comes back.
 */
export const revocationBucket = 'sync-host-revoked';

/** A revocation as stored in the bucket. */
export interface Revocation {
  deviceId: number;
  /** Unix second of the deletion: tokens issued up to then are refused. */
  revokedAt: number;
}

const retryMs = 1_000;

function openBucket(nc: NatsConnection): Promise<KV> {
  // create binds to the bucket when it exists already, so auth and relay may start in any order
  return new Kvm(nc).create(revocationBucket, { history: 1 });
}

function parse(key: string, value: string): Revocation | undefined {
  const deviceId = Number(key);
  if (!Number.isSafeInteger(deviceId) || deviceId <= 0) return undefined;
  try {
    const { revokedAt } = JSON.parse(value) as { revokedAt?: unknown };
    return typeof revokedAt === 'number' ? { deviceId, revokedAt } : undefined;
  } catch {
    return undefined;
  }
}

/** Publishes revocations; what cannot be published now is kept and published on reconnect. */
export interface RevocationPublisher {
  publish(revocation: Revocation): void;
}

/** The auth side: every device deletion goes to the bucket, retried until NATS took it. */
export function createRevocationPublisher(link: NatsLink, logger: Logger): RevocationPublisher {
  const pending = new Map<number, Revocation>();
  let flushing = false;
  let retry: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    const nc = link.connection;
    if (flushing || pending.size === 0 || nc === undefined || !link.connected) return;
    flushing = true;
    try {
      const kv = await openBucket(nc);
      for (const revocation of [...pending.values()]) {
        await kv.put(
          String(revocation.deviceId),
          JSON.stringify({ revokedAt: revocation.revokedAt }),
        );
        if (pending.get(revocation.deviceId) === revocation) pending.delete(revocation.deviceId);
        logger.info({ device: revocation.deviceId }, 'cluster: revocation published');
      }
    } catch (err: unknown) {
      logger.warn(
        { err: String(err), pending: pending.size },
        'cluster: revocation not published yet; retrying',
      );
      retry ??= setTimeout(() => {
        retry = undefined;
        void flush();
      }, retryMs);
      retry.unref();
    } finally {
      flushing = false;
    }
  }

  link.onConnected(() => void flush());
  return {
    publish(revocation) {
      pending.set(revocation.deviceId, revocation);
      void flush();
    },
  };
}

/**
 * The relay side: applies every revocation in the bucket, those from before this process
 * started and every new one, resuming after the last one seen when the connection comes back.
 */
export function followRevocations(
  link: NatsLink,
  apply: (revocation: Revocation) => void,
  logger: Logger,
): { stop(): void } {
  let lastRevision = 0;
  let stopped = false;
  let watching: { stop(): void } | undefined;
  let retry: NodeJS.Timeout | undefined;

  async function watch(nc: NatsConnection): Promise<void> {
    if (stopped || watching !== undefined) return;
    try {
      const kv = await openBucket(nc);
      const entries = await kv.watch({
        resumeFromRevision: lastRevision + 1,
        ignoreDeletes: true,
      });
      watching = entries;
      for await (const entry of entries) {
        lastRevision = Math.max(lastRevision, entry.revision);
        const revocation = parse(entry.key, entry.string());
        if (revocation !== undefined) apply(revocation);
      }
    } catch (err: unknown) {
      logger.warn({ err: String(err) }, 'cluster: cannot follow revocations; retrying');
    } finally {
      watching = undefined;
    }
    // The watch ended (server restarted, stream lost): start again from the last revision.
    if (!stopped) {
      retry = setTimeout(() => {
        const current = link.connection;
        if (current !== undefined && link.connected) void watch(current);
      }, retryMs);
      retry.unref();
    }
  }

  link.onConnected((nc) => void watch(nc));
  return {
    stop() {
      stopped = true;
      if (retry !== undefined) clearTimeout(retry);
      watching?.stop();
    },
  };
}
