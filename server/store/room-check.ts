import { z } from 'zod';
import { hmacHex, sha256Hex } from '../hashing.ts';
import type { RoomDirectory } from './room-directory.ts';

/**
 * A relay of its own process asks the auth side which rooms of its document store still have a
 * project (a cluster node over NATS, a relay with `auth.url` over HTTP). The answer decides what
 * is deleted, so it carries an HMAC of the shared secret over the request's nonce, the rooms
 * asked and the rooms said to exist: an answer that was not made with the secret deletes nothing.
 */

/** Rooms per request: well below NATS's 1 MiB payload bound and the auth service's body limit. */
export const roomsPerCheck = 500;

const macPurpose = 'sync-host room check';

export const roomIds = z.array(z.string().max(200)).max(roomsPerCheck);

export const roomCheckAnswer = z.object({
  /** The rooms among those asked that have a project; null: the database cannot be trusted to delete. */
  existing: roomIds.nullable(),
  mac: z.string(),
});

/** The MAC an answer carries. */
export function roomCheckMac(
  secret: string,
  nonce: string,
  rooms: readonly string[],
  existing: readonly string[] | null,
): string {
  const asked = sha256Hex(JSON.stringify(rooms));
  const said = existing === null ? 'unknown' : sha256Hex(JSON.stringify([...existing].sort()));
  return hmacHex(secret, `${macPurpose}:${nonce}:${asked}:${said}`);
}

/** The answer to `asked` from `rooms` (the auth database); rejects when it cannot be read now. */
export async function answerRoomCheck(
  rooms: RoomDirectory,
  secret: string,
  nonce: string,
  asked: readonly string[],
): Promise<z.infer<typeof roomCheckAnswer>> {
  const found = await rooms.existing(asked);
  const existing = found === undefined ? null : asked.filter((room) => found.has(room));
  return { existing, mac: roomCheckMac(secret, nonce, asked, existing) };
}

/**
 * A `RoomDirectory` that asks `ask` for at most `perRequest` rooms at a time; `ask` returns the
 * rooms that exist, or null when the auth side cannot be trusted to delete.
 */
export function roomDirectoryAsking(
  ask: (rooms: string[]) => Promise<string[] | null>,
  perRequest = roomsPerCheck,
): RoomDirectory {
  return {
    async existing(rooms) {
      const found = new Set<string>();
      for (let i = 0; i < rooms.length; i += perRequest) {
        const existing = await ask(rooms.slice(i, i + perRequest));
        if (existing === null) return undefined;
        for (const room of existing) found.add(room);
      }
      return found;
    },
  };
}
