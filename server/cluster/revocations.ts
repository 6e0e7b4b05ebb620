import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { MemberRevocation } from '../../protocol/room-grant.ts';
import type { Logger } from '../log.ts';
import type { NatsLink } from './nats-link.ts';
import { watchBucket } from './ordered-follow.ts';
import type { RecordSeal } from './record-seal.ts';

/**
 * Deleted devices, one key per device id holding `{"revokedAt":<unix s>}`, and ended memberships
 * (teams), one key `member.<userId>.<roomId>` holding `{"memberId":<id>}` (the latest membership
 * of that user in that room that ended). A KV bucket (a JetStream stream) rather than plain
 * messages, so that a relay node that was away (restarted, cut off from NATS) reads every
 * revocation it missed when it comes back.
 */
export const revocationBucket = 'sync-host-revoked';

/** A device's revocation as stored in the bucket. */
export interface DeviceRevocation {
  deviceId: number;
  /** Unix second of the deletion: tokens issued up to then are refused. */
  revokedAt: number;
}

/** What the bucket holds: deleted devices and ended memberships. */
export type Revocation = DeviceRevocation | MemberRevocation;

const memberKeyShape = /^member\.([1-9]\d{0,14})\.(.+)$/;

/** The bucket's key of a revocation. */
function keyOf(revocation: Revocation): string {
  return 'deviceId' in revocation
    ? String(revocation.deviceId)
    : `member.${revocation.userId}.${revocation.roomId}`;
}

/** The bucket's value of a revocation. */
function bucketValue(revocation: Revocation): string {
  return JSON.stringify(
    'deviceId' in revocation
      ? { revokedAt: revocation.revokedAt }
      : { memberId: revocation.memberId },
  );
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
  let fields: { revokedAt?: unknown; memberId?: unknown };
  try {
    fields = JSON.parse(value) as typeof fields;
  } catch {
    return undefined;
  }
  const member = memberKeyShape.exec(key);
  if (member !== null) {
    const [, userId, roomId] = member as unknown as [string, string, string];
    const { memberId } = fields;
    return typeof memberId === 'number' && Number.isSafeInteger(memberId) && memberId > 0
      ? { roomId, userId: Number(userId), memberId }
      : undefined;
  }
  const deviceId = Number(key);
  if (!Number.isSafeInteger(deviceId) || deviceId <= 0) return undefined;
  return typeof fields.revokedAt === 'number'
    ? { deviceId, revokedAt: fields.revokedAt }
    : undefined;
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
  const pending = new Map<string, Revocation>();
  let flushing = false;
  let retry: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    const nc = link.connection;
    if (flushing || pending.size === 0 || nc === undefined || !link.connected) return;
    flushing = true;
    try {
      const kv = await openBucket(nc, replicas, logger);
      for (const [key, revocation] of [...pending]) {
        await kv.put(key, seal.seal('revocation', key, bucketValue(revocation)));
        if (pending.get(key) === revocation) pending.delete(key);
        logger.info(
          'deviceId' in revocation
            ? { device: revocation.deviceId }
            : { member: revocation.userId, room: revocation.roomId },
          'cluster: revocation published',
        );
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
      pending.set(keyOf(revocation), revocation);
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
