import { z } from 'zod';
import { hmacHex, randomHex, safeEqual } from '../hashing.ts';
import type { Logger } from '../log.ts';
import type { DeviceDirectory, DeviceRecord } from '../relay/stored-device-check.ts';
import { signRelayCredential, verifyRelayCredential } from '../tokens.ts';
import { answerRequests, type NatsLink } from './nats-link.ts';
import { recordSealFor } from './record-seal.ts';

/**
 * The join check of cluster nodes over NATS: a relay node asks, every auth process with
 * `CLUSTER_NATS` answers what `GET /relay/devices/:id` answers. Each auth process answers (no
 * queue group), the first answer counts, so a NATS client that takes requests and stays silent
 * cannot hold them back.
 *
 * Both ways carry an HMAC of the shared secret, although NATS is meant to be private: the answer
 * decides who may join, so a NATS client without the secret can neither ask for device records
 * (the request carries the relay credential of the `auth.url` feed) nor answer in the auth
 * service's place (the answer's MAC covers the request's nonce, the device id and the record).
 */
export const deviceCheckSubject = 'sync-host.devices.check';

const macPurpose = 'sync-host device check';

const requestSchema = z.object({
  deviceId: z.number().int().positive(),
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  credential: z.string(),
});
const recordSchema = z.object({
  userId: z.number().int().positive(),
  tokenDigest: z.string().regex(/^[0-9a-f]{64}$/),
});
const answerSchema = z.object({
  /** The record; null for a device deleted or never issued. */
  device: recordSchema.nullable().optional(),
  /** Set instead of `device` when the auth database cannot answer now. */
  error: z.literal('unavailable').optional(),
  /**
   * Set instead of both when the credential was made with the secret but its time is too far
   * from the auth process's clock: that clock's unix second, for the node to ask again.
   */
  clock: z.number().int().positive().optional(),
  mac: z.string(),
});

type Outcome = { device: DeviceRecord | null } | { error: 'unavailable' };

function answerMac(secret: string, nonce: string, deviceId: number, outcome: Outcome): string {
  const what =
    'error' in outcome
      ? 'unavailable'
      : outcome.device === null
        ? 'none'
        : `${outcome.device.userId}:${outcome.device.tokenDigest}`;
  return hmacHex(secret, `${macPurpose}:${nonce}:${deviceId}:${what}`);
}

/** The MAC of a `clock` answer: the auth process's time, for this request only. */
function clockMac(secret: string, nonce: string, deviceId: number, seconds: number): string {
  return hmacHex(secret, `${macPurpose}:${nonce}:${deviceId}:clock:${seconds}`);
}

/** The time of a relay credential made with `secret`, whatever its distance to now. */
function credentialTime(credential: string, secret: string): number | undefined {
  const time = Number(/^relay\.(\d{1,12})\./.exec(credential)?.[1]);
  return Number.isSafeInteger(time) && verifyRelayCredential(credential, secret, time)
    ? time
    : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export interface DeviceCheckOptions {
  secret: string;
  logger: Logger;
  now: () => number;
}

/**
 * The auth side: answers device checks on every connection of `link` with `lookup` (the auth
 * database). Requests without a valid relay credential get no answer.
 */
export function answerDeviceChecks(
  link: NatsLink,
  lookup: (deviceId: number) => Promise<DeviceRecord | undefined>,
  options: DeviceCheckOptions,
): { stop(): void } {
  const { secret, logger } = options;
  let refusing = false;

  async function answer(data: string, respond: (text: string) => void): Promise<void> {
    const request = requestSchema.safeParse(parseJson(data));
    if (!request.success) return;
    const { deviceId, nonce, credential } = request.data;
    const seconds = Math.floor(options.now() / 1000);
    if (
      !verifyRelayCredential(credential, secret, seconds) &&
      credentialTime(credential, secret) !== undefined
    ) {
      // made with the secret on a clock too far from this one: the node asks again on this one
      respond(JSON.stringify({ clock: seconds, mac: clockMac(secret, nonce, deviceId, seconds) }));
      return;
    }
    if (!verifyRelayCredential(credential, secret, seconds)) {
      // Said once per run of refusals: a NATS client can send these as often as it likes.
      if (!refusing) {
        logger.warn(
          'cluster: device checks with an invalid relay credential are not answered (another NATS client, or auth.secret differs from AUTH_SECRET)',
        );
      }
      refusing = true;
      return;
    }
    refusing = false;
    let outcome: Outcome;
    try {
      outcome = { device: (await lookup(deviceId)) ?? null };
    } catch (err: unknown) {
      logger.warn({ err: String(err) }, 'cluster: a device check found the database unavailable');
      outcome = { error: 'unavailable' };
    }
    respond(JSON.stringify({ ...outcome, mac: answerMac(secret, nonce, deviceId, outcome) }));
  }

  return answerRequests(link, deviceCheckSubject, answer);
}

/**
 * The relay side: devices looked up over NATS. Resolves undefined for a device the auth service
 * says is gone, and for an answer without a valid MAC (someone else answered: refused, and said
 * once); rejects when no auth process answers within `timeoutMs` or the database is unavailable,
 * as the `auth.url` lookup does when the auth service is unreachable.
 */
export function createNatsDeviceDirectory(
  link: () => NatsLink | undefined,
  options: DeviceCheckOptions & { timeoutMs?: number },
): DeviceDirectory {
  const { secret, logger } = options;
  const timeoutMs = options.timeoutMs ?? 3_000;
  let forgedSaid = false;
  /** The auth processes' clock minus this node's (s), learnt from a `clock` answer. */
  let authOffsetSeconds = 0;
  /** One request; a `clock` answer (its MAC checked) moves the offset and asks once again. */
  async function ask(
    deviceId: number,
    again: boolean,
  ): Promise<{ answer: z.infer<typeof answerSchema> | undefined; nonce: string }> {
    const nc = link()?.connection;
    if (nc === undefined || link()?.connected !== true) throw new Error('NATS is not connected');
    const nonce = randomHex(16);
    const seconds = Math.floor(options.now() / 1000);
    const credential = signRelayCredential(secret, seconds + authOffsetSeconds);
    const msg = await nc.request(
      deviceCheckSubject,
      JSON.stringify({ deviceId, nonce, credential }),
      { timeout: timeoutMs },
    );
    const answer = answerSchema.safeParse(parseJson(msg.string()));
    const clock = answer.data?.clock;
    if (
      !again ||
      clock === undefined ||
      !safeEqual(answer.data?.mac ?? '', clockMac(secret, nonce, deviceId, clock))
    ) {
      return { answer: answer.success ? answer.data : undefined, nonce };
    }
    authOffsetSeconds = clock - seconds;
    logger.warn(
      { offsetSeconds: authOffsetSeconds },
      `cluster: the auth processes' clock is ${Math.abs(authOffsetSeconds)} s ${authOffsetSeconds > 0 ? 'ahead of' : 'behind'} this node's; device checks are signed on theirs (set this node's time: NTP)`,
    );
    return ask(deviceId, false);
  }
  return {
    async lookup(deviceId) {
      const { answer, nonce } = await ask(deviceId, true);
      const outcome: Outcome | undefined =
        answer?.error !== undefined
          ? { error: answer.error }
          : answer?.device !== undefined
            ? { device: answer.device }
            : undefined;
      if (
        answer === undefined ||
        outcome === undefined ||
        !safeEqual(answer.mac, answerMac(secret, nonce, deviceId, outcome))
      ) {
        if (!forgedSaid) {
          logger.warn(
            'cluster: a device check was answered without the shared secret’s MAC (another NATS client, or auth.secret differs from AUTH_SECRET); the join is refused',
          );
        }
        forgedSaid = true;
        // counted with the records dropped for their seal (cluster.rejected on /health)
        recordSealFor(secret, logger).reject('check', true);
        return undefined;
      }
      if ('error' in outcome) throw new Error('the auth service’s database is unavailable');
      return outcome.device ?? undefined;
    },
  };
}
