import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { NatsLink } from './nats-link.ts';
import { watchBucket } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';

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

/**
 * Opens the bucket, made with `replicas` (3 when three or more NATS servers are listed) unless
 * it exists: auth and relay may start in any order. A bucket made with fewer replicas (by an
 * older version, or while one server was listed) is raised to `replicas`; when NATS refuses
 * that now (a server down), the bucket is used as it is and raised on a later opening.
 */
async function openBucket(nc: NatsConnection, replicas: number, logger: Logger): Promise<KV> {
  const kv = await new Kvm(nc).create(revocationBucket, { history: 1, replicas });
  if (replicas > 1) {
    const stream = `KV_${revocationBucket}`;
    try {
      const jsm = await jetstreamManager(nc);
      const { config } = await jsm.streams.info(stream);
      if (config.num_replicas < replicas) {
        await jsm.streams.update(stream, { ...config, num_replicas: replicas });
        logger.info({ replicas }, 'cluster: revocation bucket raised to more replicas');
      }
    } catch (err: unknown) {
      logger.warn({ err: String(err), replicas }, 'cluster: revocation bucket not raised yet');
    }
  }
  return kv;
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
export function createRevocationPublisher(
  link: NatsLink,
  replicas: number,
  logger: Logger,
  seal: RecordSeal,
): RevocationPublisher {
  const pending = new Map<number, Revocation>();
  let flushing = false;
  let retry: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    const nc = link.connection;
    if (flushing || pending.size === 0 || nc === undefined || !link.connected) return;
    flushing = true;
    try {
      const kv = await openBucket(nc, replicas, logger);
      for (const revocation of [...pending.values()]) {
        const key = String(revocation.deviceId);
        await kv.put(
          key,
          seal.seal('revocation', key, JSON.stringify({ revokedAt: revocation.revokedAt })),
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
 * started and every new one, in order; the watch is made again by itself after any loss (a
 * reconnect, the NATS server holding it lost) from the next revision.
 */
export function followRevocations(
  link: NatsLink,
  replicas: number,
  apply: (revocation: Revocation) => void,
  logger: Logger,
  seal: RecordSeal,
): { stop(): void } {
  let stopped = false;
  let stopWatch: (() => void) | undefined;
  let retry: NodeJS.Timeout | undefined;

  async function watch(nc: NatsConnection): Promise<void> {
    if (stopped || stopWatch !== undefined) return;
    try {
      await openBucket(nc, replicas, logger);
    } catch (err: unknown) {
      logger.warn({ err: String(err) }, 'cluster: cannot open the revocations; retrying');
      retry = setTimeout(() => {
        const current = link.connection;
        if (current !== undefined && link.connected) void watch(current);
      }, retryMs);
      retry.unref();
      return;
    }
    if (stopped || stopWatch !== undefined) return;
    stopWatch = watchBucket(
      jetstream(nc),
      revocationBucket,
      1,
      (change) => {
        if (change.operation !== 'PUT') return;
        // a revocation without the seal (another NATS client) cuts nobody off
        const text = seal.openText('revocation', change.key, change.value);
        const revocation = text === undefined ? undefined : parse(change.key, text);
        if (revocation !== undefined) apply(revocation);
      },
      (err) => logger.warn({ err: String(err) }, 'cluster: following revocations again'),
    );
  }

  link.onConnected((nc) => void watch(nc));
  return {
    stop() {
      stopped = true;
      if (retry !== undefined) clearTimeout(retry);
      stopWatch?.();
    },
  };
}
