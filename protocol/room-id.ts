/** Random bytes in a room id (written as 32 hex digits). */
export const roomIdRandomBytes = 16;
/** Hex digits of a room id's signature: the first half of an HMAC-SHA256. */
export const roomIdSignatureLength = 32;

const roomIdShape = /^([1-9]\d{0,14})\.([0-9a-f]{32})\.([0-9a-f]{32})$/;

/** The parts of a room id `<userId>.<32 random hex>.<32 hex signature>`. */
export interface RoomIdParts {
  /** The owner's user id as written in the id. */
  user: string;
  random: string;
  signature: string;
}

/** The signed part of a room id: `<userId>.<random>`. */
export function roomIdPayload(user: string, random: string): string {
  return `${user}.${random}`;
}

/** Splits a room id into its parts without checking its signature; undefined when malformed. */
export function parseRoomId(roomId: unknown): RoomIdParts | undefined {
  if (typeof roomId !== 'string') return undefined;
  const match = roomIdShape.exec(roomId);
  if (match === null) return undefined;
  const [, user, random, signature] = match as unknown as [string, string, string, string];
  return { user, random, signature };
}

/**
 * The user of a room: the part of its id before the first dot (room ids are
 * `<userId>.<random>.<signature>`, see `parseRoomId`); a room id without a dot (only with
 * validation off) is its own user. The migration computes the same in SQL.
 */
export function userOfRoom(room: string): string {
  const dot = room.indexOf('.');
  return dot > 0 ? room.slice(0, dot) : room;
}
