import { z } from 'zod';
import { randomHex, safeEqual } from '../hashing.ts';
import {
  answerRoomCheck,
  roomCheckAnswer,
  roomCheckMac,
  roomDirectoryAsking,
  roomIds,
} from '../store/room-check.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import { signRelayCredential, verifyRelayCredential } from '../tokens.ts';
import type { DeviceCheckOptions } from './nats-device-lookups.ts';
import { answerRequests, type NatsLink } from './nats-link.ts';
import { recordSealFor } from './record-seal.ts';

/**
 * Which rooms still have a project, asked by cluster nodes over NATS: the document store they
 * share forgets the documents of the others (a deleted project or user). Every auth process with
 * `CLUSTER_NATS` answers from its database; the first answer counts.
 *
 * An answer decides what is deleted, so both ways carry an HMAC of the shared secret: the
 * request the relay credential, the answer a MAC over the request's nonce, the rooms asked and
 * the rooms said to exist (store/room-check.ts). A request whose credential does not verify
 * (another NATS client, or a clock too far off) gets no answer, and the node then deletes nothing.
 */
export const roomCheckSubject = 'sync-host.rooms.check';

const requestSchema = z.object({
  rooms: roomIds,
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  credential: z.string(),
});

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The auth side: answers room checks on every connection of `link` from `rooms` (the auth database). */
export function answerRoomChecks(
  link: NatsLink,
  rooms: RoomDirectory,
  options: DeviceCheckOptions,
): { stop(): void } {
  const { secret, logger } = options;

  async function answer(data: string, respond: (text: string) => void): Promise<void> {
    const request = requestSchema.safeParse(parseJson(data));
    if (!request.success) return;
    const { rooms: asked, nonce, credential } = request.data;
    if (!verifyRelayCredential(credential, secret, Math.floor(options.now() / 1000))) return;
    try {
      respond(JSON.stringify(await answerRoomCheck(rooms, secret, nonce, asked)));
    } catch (err: unknown) {
      // No answer: the node deletes nothing and asks again at its next sweep.
      logger.warn({ err: String(err) }, 'cluster: a room check found the database unavailable');
    }
  }

  return answerRequests(link, roomCheckSubject, answer);
}

/**
 * The relay side: a `RoomDirectory` asking the auth processes over NATS. Rejects when none
 * answers within `timeoutMs` or an answer's MAC is wrong (nothing is deleted then).
 */
export function createNatsRoomDirectory(
  link: () => NatsLink | undefined,
  options: DeviceCheckOptions & { timeoutMs?: number },
): RoomDirectory {
  const { secret } = options;
  const timeoutMs = options.timeoutMs ?? 5_000;
  return roomDirectoryAsking(async (rooms) => {
    const nc = link()?.connection;
    if (nc === undefined || link()?.connected !== true) throw new Error('NATS is not connected');
    const nonce = randomHex(16);
    const credential = signRelayCredential(secret, Math.floor(options.now() / 1000));
    const msg = await nc.request(roomCheckSubject, JSON.stringify({ rooms, nonce, credential }), {
      timeout: timeoutMs,
    });
    const answer = roomCheckAnswer.safeParse(parseJson(msg.string()));
    if (
      !answer.success ||
      !safeEqual(answer.data.mac, roomCheckMac(secret, nonce, rooms, answer.data.existing))
    ) {
      // counted with the records dropped for their seal (cluster.rejected on /health)
      recordSealFor(secret, options.logger).reject('check', true);
      throw new Error('a room check was answered without the shared secret’s MAC');
    }
    return answer.data.existing;
  });
}
