import { z } from 'zod';
import { isStandardBase64 } from './base64.ts';
import { maxGrantLength, memberRoles } from './room-grant.ts';

/**
 * The frames of the relay protocol, both directions. The relay validates what clients send with
 * the first half and writes the second half; clients do the reverse.
 */

/** The longest device id (and room id) a client may write, in characters. */
export const maxDeviceIdLength = 255;

/**
 * A device id as a client writes it: a positive integer or its decimal string (what a device
 * token carries); any short string when token validation is off. Compared as strings.
 */
export const deviceIdSchema = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  z.string().min(1).max(maxDeviceIdLength),
]);

export type DeviceId = z.infer<typeof deviceIdSchema>;

/** The key a device id is known by: its decimal string, whatever JSON type the client used. */
export function deviceKey(device: DeviceId): string {
  return typeof device === 'number' ? String(device) : device;
}

// ---- client → relay ----

/** The longest token a join may carry, in characters. */
const maxTokenLength = 1024;

export const joinSchema = z.object({
  type: z.literal('join'),
  room: z.string().min(1).max(maxDeviceIdLength),
  device: deviceIdSchema,
  /** Optional in the shape so a missing token is reported as `auth_failed`, not `invalid_message`. */
  token: z.string().max(maxTokenLength).optional(),
  /** A member's room grant (protocol/room-grant.ts), for a room of another user; checked as the token is. */
  grant: z.string().max(maxGrantLength).optional(),
});

export const leaveSchema = z.object({ type: z.literal('leave') });
export const pingSchema = z.object({ type: z.literal('ping') });

/**
 * The document store's frames (docs/store.md). A document key: the provider's name, or a keyed
 * digest of it when the project is encrypted.
 */
export const docKeySchema = z.string().min(1).max(maxDeviceIdLength);
/** A key check value (`kc`): which key sealed an entry; absent when it is not encrypted. */
export const keyCheckSchema = z.string().min(1).max(64);
/** A position in a document: 1, 2, 3, ... (0 in `after`: before the first). */
const positionSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/** Standard base64 with padding: what an entry's bytes travel as. */
export const base64Schema = z.string().refine(isStandardBase64, { error: 'must be base64' });
/** One piece of an update too large for one frame: message `m`, piece `i` of `n`. */
export const pieceSchema = z.object({
  m: z.string().min(1).max(64),
  i: z.number().int().nonnegative().max(1_000_000),
  n: z.number().int().positive().max(1_000_000),
});

/** Stores one entry of a document; `ref` is echoed in `appended` (or the error). */
export const appendSchema = z.object({
  type: z.literal('append'),
  doc: docKeySchema,
  ref: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  data: base64Schema,
  kc: keyCheckSchema.optional(),
  /**
   * With `kc`: the key's store proof (base64url of 32 bytes) whose SHA-256 starts with `kc` in
   * hex, so only a device holding the key files entries under its check value.
   */
  kp: z.string().max(64).optional(),
  /** A snapshot: stands for every entry of the same `kc` up to this position. */
  covers: positionSchema.optional(),
  part: pieceSchema.optional(),
  /** Kept for the whole history window (a version just before a delete). */
  keep: z.literal(true).optional(),
});

/** Asks for what the host keeps of a document after position `after`. */
export const catchupSchema = z.object({
  type: z.literal('catchup'),
  doc: docKeySchema,
  after: positionSchema,
  kc: keyCheckSchema.optional(),
  /** false: no snapshot first, every entry still kept (after a snapshot that did not open). */
  snapshots: z.boolean().optional(),
  /** true: `caughtup` names the key check values of every entry kept in the room (`kcs`). */
  keys: z.boolean().optional(),
});

/**
 * A chunk's id: `"s"` + base64url of the SHA-256 of its bytes (not encrypted: the relay checks
 * it), or `"h"` + base64url of a keyed HMAC of its plaintext (encrypted: the reader checks it).
 */
export const chunkIdSchema = z.string().regex(/^[sh][A-Za-z0-9_-]{43}$/, {
  error: 'must be "s" or "h" and 43 base64url characters',
});
/** An integer of the client's choice, echoed in the answer. */
const refSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/** Ids one `chunk-have` may ask about. */
export const maxChunkIdsPerHave = 1000;
/** Paths one `folder-report` may name. */
export const maxReportedNames = 2000;
/**
 * Bytes one folder report counts on the host at most (`reportBytes`: its names as JSON, its
 * document's and device's keys and 64): a larger one is refused with `store_full`, and a
 * device sends fewer names so that its report fits.
 */
export const maxReportBytes = 256 * 1024;
/** Folder documents of one room (project) whose reports the host keeps. */
export const maxReportsPerRoom = 16;

const utf8 = new TextEncoder();
const utf8Length = (text: string): number => utf8.encode(text).length;

/**
 * What a folder report counts against the store's bounds: the UTF-8 bytes of its names as JSON
 * (none when encrypted: the host keeps no names then), of its document's and device's keys, and
 * 64 for its row.
 */
export function reportBytes(report: {
  doc: string;
  device: string;
  names?: readonly string[] | undefined;
}): number {
  const names = report.names === undefined ? 0 : utf8Length(JSON.stringify(report.names));
  return 64 + utf8Length(report.doc) + utf8Length(report.device) + names;
}

/**
 * The first of `names` (at most `maxReportedNames`) that a report of `doc` by a device whose
 * key has up to 64 characters can carry within `maxReportBytes`.
 */
export function reportedNames(doc: string, names: readonly string[]): string[] {
  let room = maxReportBytes - 64 - utf8Length(doc) - 4 * 64 - 2;
  const kept: string[] = [];
  for (const name of names.slice(0, maxReportedNames)) {
    room -= utf8Length(JSON.stringify(name)) + 1;
    if (room < 0) break;
    kept.push(name);
  }
  return kept;
}

/** Keeps one chunk of the room's files (docs/store.md, "Chunks"); answered `chunk-stored`. */
export const chunkPutSchema = z.object({
  type: z.literal('chunk-put'),
  ref: refSchema,
  id: chunkIdSchema,
  data: base64Schema,
  kc: keyCheckSchema.optional(),
  /** With `kc`: the key's store proof, as for `append`. */
  kp: z.string().max(64).optional(),
});

/** Which of `ids` the host holds (under `kc`); answered `chunk-held`. */
export const chunkHaveSchema = z.object({
  type: z.literal('chunk-have'),
  ref: refSchema,
  ids: z.array(chunkIdSchema).max(maxChunkIdsPerHave),
  kc: keyCheckSchema.optional(),
});

/** Fetches one chunk; answered `chunk` (or `chunk_missing`). */
export const chunkGetSchema = z.object({
  type: z.literal('chunk-get'),
  ref: refSchema,
  id: chunkIdSchema,
  kc: keyCheckSchema.optional(),
  /**
   * true: the `chunk` answer comes as a binary frame (`encodeBinaryFrame`); false: as text with
   * base64 `data`. Absent: binary once this connection sent a binary `chunk-put`, else text.
   */
  binary: z.boolean().optional(),
});

/** Ids one `chunk-bad` may name. */
export const maxChunkIdsPerBad = 64;

/**
 * Chunks a device fetched that failed their check (docs/store.md, "A damaged chunk"): the host
 * drops those it finds damaged (unencrypted: their bytes do not hash to their id; sealed, which
 * it cannot check: on the key's proof `kp`, as for `append`), so they count as missing and a
 * device that has them puts them again. Answered `chunk-dropped`.
 */
export const chunkBadSchema = z.object({
  type: z.literal('chunk-bad'),
  ref: refSchema,
  ids: z.array(chunkIdSchema).min(1).max(maxChunkIdsPerBad),
  kc: keyCheckSchema.optional(),
  kp: z.string().max(64).optional(),
});

/** A device's count of the live files of a synced folder (shown in the admin UI); no answer. */
export const folderReportSchema = z.object({
  type: z.literal('folder-report'),
  doc: docKeySchema,
  files: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  bytes: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  encrypted: z.boolean(),
  /** Only when `encrypted` is false (dropped otherwise). */
  names: z.array(z.string().max(4096)).max(maxReportedNames).optional(),
});

export type ChunkPutFrame = z.infer<typeof chunkPutSchema>;
export type ChunkHaveFrame = z.infer<typeof chunkHaveSchema>;
export type ChunkGetFrame = z.infer<typeof chunkGetSchema>;
export type ChunkBadFrame = z.infer<typeof chunkBadSchema>;
export type FolderReportFrame = z.infer<typeof folderReportSchema>;
export type AppendFrame = z.infer<typeof appendSchema>;
export type CatchupFrame = z.infer<typeof catchupSchema>;
export type Piece = z.infer<typeof pieceSchema>;

/** Whether a parsed JSON value is an object (not an array, not null). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A routed message has no `type`; `room` and `from` may be present and are ignored. */
export const routeSchema = z.object({
  to: z.union([z.literal('host'), z.literal('broadcast'), deviceIdSchema], {
    error: 'to must be "host", "broadcast" or a device id',
  }),
  payload: z.custom<Record<string, unknown>>(isJsonObject, {
    error: 'payload must be a JSON object',
  }),
});

export type JoinFrame = z.infer<typeof joinSchema>;
/** `{to, payload}` as a client sends it. */
export type RouteFrame = z.infer<typeof routeSchema>;
/** Where a client addresses a message: the room's host, everyone else, or one device. */
export type RouteTarget = RouteFrame['to'];

// ---- relay → client ----

/**
 * The frames the relay sends, over a schema for the device ids in them: the relay writes ids as
 * each client wrote its own (`wireDeviceId`); a client may read them into another form.
 */
export function relayFrameSchemas<D extends z.ZodType>(deviceId: D) {
  const { joined, presence, host, error, pong, routed } = roomFrames(deviceId);
  const { appended, stored, caughtup } = storeFrames(deviceId);
  const { chunkStored, chunkHeld, chunk, chunkDropped, chunksLost } = chunkFrames();
  const control = z.discriminatedUnion('type', [
    joined,
    presence,
    host,
    error,
    pong,
    appended,
    stored,
    caughtup,
    chunkStored,
    chunkHeld,
    chunk,
    chunkDropped,
    chunksLost,
  ]);
  return {
    joined,
    presence,
    host,
    error,
    pong,
    appended,
    stored,
    caughtup,
    chunkStored,
    chunkHeld,
    chunk,
    chunkDropped,
    chunksLost,
    routed,
    control,
  };
}

/** The frames of a room: joined, presence, host, error, pong and a routed message. */
function roomFrames<D extends z.ZodType>(deviceId: D) {
  const joined = z.object({
    type: z.literal('joined'),
    room: z.string(),
    device: deviceId,
    role: z.enum(['host', 'member']),
    host: deviceId,
    devices: z.array(deviceId),
    buffered: z.number().int().nonnegative(),
    gap: z.boolean(),
    /**
     * A shared project's room: each present device's role (`owner`, `editor`, `viewer`) by
     * device id. Absent: every device is the owner's.
     */
    roles: z.record(z.string(), z.enum(['owner', ...memberRoles])).optional(),
  });
  const presence = z.object({
    type: z.literal('presence'),
    room: z.string(),
    device: deviceId,
    state: z.enum(['joined', 'left']),
    /** Why a device left: `leave`, `disconnect` or `revoked`. */
    reason: z.string().optional(),
    /** A joining device's role in a shared project's room (absent: the owner's device). */
    role: z.enum(['owner', ...memberRoles]).optional(),
  });
  const host = z.object({ type: z.literal('host'), room: z.string(), device: deviceId });
  const error = z.object({
    type: z.literal('error'),
    code: z.string(),
    message: z.string().default(''),
    /** The document and append an error of the store is about. */
    doc: z.string().optional(),
    ref: z.number().optional(),
    /** The chunk a chunk frame's error is about. */
    id: z.string().optional(),
  });
  const pong = z.object({ type: z.literal('pong') });
  /** A routed message: `from` the sender, `to` as the sender wrote it. */
  const routed = z.object({
    from: deviceId,
    /** `viewer`: the sender is a viewer's device (a shared project): its document updates are ignored. */
    role: z.literal('viewer').optional(),
    to: deviceId,
    room: z.string(),
    payload: z.record(z.string(), z.unknown()),
  });
  return { joined, presence, host, error, pong, routed };
}

/** The document store's answers: an append durable, a catch-up's pages and its end. */
function storeFrames<D extends z.ZodType>(deviceId: D) {
  /** The entry sent with this `ref` is durable at position `pos`. */
  const appended = z.object({
    type: z.literal('appended'),
    doc: z.string(),
    ref: z.number(),
    pos: z.number().int().positive(),
  });
  /** One entry as the host keeps it. */
  const storedEntry = z.object({
    pos: z.number().int().positive(),
    at: z.number(),
    from: deviceId,
    data: z.string(),
    kc: z.string().optional(),
    covers: z.number().int().nonnegative().optional(),
    part: pieceSchema.optional(),
    keep: z.literal(true).optional(),
  });
  /** One page of a catch-up, entries in order. */
  const stored = z.object({
    type: z.literal('stored'),
    doc: z.string(),
    entries: z.array(storedEntry),
  });
  /**
   * The catch-up is complete; `pos` is the last position the host holds for the document. `kcs`
   * (asked with `keys`): the distinct key check values of the entries the host keeps in the
   * room, of any document.
   */
  const caughtup = z.object({
    type: z.literal('caughtup'),
    doc: z.string(),
    pos: z.number().int().nonnegative(),
    kcs: z.array(z.string()).optional(),
  });
  return { appended, stored, caughtup };
}

/** The chunk store's answers, and the chunks a host dropped as damaged. */
function chunkFrames() {
  /** The chunk sent with this `ref` is durable on the host. */
  const chunkStored = z.object({
    type: z.literal('chunk-stored'),
    ref: z.number(),
    id: z.string(),
  });
  /** The ids of a `chunk-have` the host holds. */
  const chunkHeld = z.object({
    type: z.literal('chunk-held'),
    ref: z.number(),
    ids: z.array(z.string()),
  });
  /** One chunk's bytes, base64, as its device sent them. */
  const chunk = z.object({
    type: z.literal('chunk'),
    ref: z.number(),
    id: z.string(),
    data: z.string(),
  });
  /** The ids of a `chunk-bad` the host dropped (the others it holds intact, or not at all). */
  const chunkDropped = z.object({
    type: z.literal('chunk-dropped'),
    ref: z.number(),
    ids: z.array(z.string()),
  });
  /**
   * To every device of the room connected to this host: it dropped these chunks (under `kc`)
   * as damaged; a device whose files name them puts them again.
   */
  const chunksLost = z.object({
    type: z.literal('chunks-lost'),
    ids: z.array(z.string()),
    kc: z.string().optional(),
  });
  return { chunkStored, chunkHeld, chunk, chunkDropped, chunksLost };
}

/** A device id in a frame the relay writes: as its device wrote it in its join. */
export const wireDeviceId = z.union([z.string(), z.number()]);

const wire = relayFrameSchemas(wireDeviceId);

/** `joined`: the device is in the room; `buffered` missed messages follow at once. */
export type JoinedFrame = z.input<typeof wire.joined>;
/** Another device joined or left the room. */
export type PresenceFrame = z.input<typeof wire.presence>;
/** The room has a new host. */
export type HostFrame = z.input<typeof wire.host>;
/** `appended`: an entry is durable at `pos`. */
export type AppendedFrame = z.input<typeof wire.appended>;
/** `stored`: one page of a catch-up. */
export type StoredFrame = z.input<typeof wire.stored>;
/** `caughtup`: the end of a catch-up. */
export type CaughtupFrame = z.input<typeof wire.caughtup>;
/** `chunk-stored`: a chunk is durable on the host. */
export type ChunkStoredFrame = z.input<typeof wire.chunkStored>;
/** `chunk-held`: the asked ids the host holds. */
export type ChunkHeldFrame = z.input<typeof wire.chunkHeld>;
/** `chunk`: one chunk's bytes. */
export type ChunkFrame = z.input<typeof wire.chunk>;
/** `chunk-dropped`: the ids of a `chunk-bad` the host dropped. */
export type ChunkDroppedFrame = z.input<typeof wire.chunkDropped>;
/** `chunks-lost`: chunks the host dropped as damaged, for the devices that hold them. */
export type ChunksLostFrame = z.input<typeof wire.chunksLost>;

// ---- chunk data in binary frames ----

/**
 * A `chunk-put` (device to host) or `chunk` (host to device) may travel as a binary WebSocket
 * frame instead of text with base64 `data`: a 4-byte big-endian length `n`, `n` bytes of UTF-8
 * JSON (the frame's members without `data`), then the chunk's bytes as they are. No base64: a
 * third fewer bytes on the wire, and no encode or decode at either end.
 */
export interface BinaryFrame {
  /** The frame's members but `data` (a JSON object with a string `type`). */
  header: Record<string, unknown> & { type: string };
  /** The chunk's bytes: a view of the frame's own bytes, not a copy. */
  data: Uint8Array;
}

/** The longest header a binary frame may have, in bytes: far more than a chunk frame needs. */
export const maxBinaryHeaderBytes = 4096;

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Allocates `n` bytes: a Buffer in Node (what `ws` sends without a copy), else a Uint8Array. */
function allocate(n: number): Uint8Array {
  const NodeBuffer = (globalThis as { Buffer?: { allocUnsafe(size: number): Uint8Array } }).Buffer;
  return NodeBuffer === undefined ? new Uint8Array(n) : NodeBuffer.allocUnsafe(n);
}

/** The binary form of a frame: `header` (its members but `data`) and then `data`. */
export function encodeBinaryFrame(header: Record<string, unknown>, data: Uint8Array): Uint8Array {
  const head = utf8Encoder.encode(JSON.stringify(header));
  const frame = allocate(4 + head.length + data.length);
  new DataView(frame.buffer, frame.byteOffset, 4).setUint32(0, head.length);
  frame.set(head, 4);
  frame.set(data, 4 + head.length);
  return frame;
}

/** The size in bytes of the binary form of `header` with `dataBytes` of data. */
export function binaryFrameBytes(header: Record<string, unknown>, dataBytes: number): number {
  return 4 + utf8Encoder.encode(JSON.stringify(header)).length + dataBytes;
}

/**
 * Reads a binary frame; undefined when its header is malformed: shorter than its length says
 * or than `maxBinaryHeaderBytes`, not UTF-8, not a JSON object, without a string `type`, or
 * with a `data` member (the data is what follows the header). Never throws. Which types may
 * come as binary frames is the reader's to check.
 */
export function decodeBinaryFrame(frame: Uint8Array): BinaryFrame | undefined {
  if (frame.length < 4) return undefined;
  const n = new DataView(frame.buffer, frame.byteOffset, 4).getUint32(0);
  if (n > maxBinaryHeaderBytes || 4 + n > frame.length) return undefined;
  let header: unknown;
  try {
    header = JSON.parse(utf8Decoder.decode(frame.subarray(4, 4 + n)));
  } catch (err: unknown) {
    if (err instanceof SyntaxError || err instanceof TypeError) return undefined;
    throw err;
  }
  if (!isJsonObject(header) || typeof header.type !== 'string' || 'data' in header) {
    return undefined;
  }
  return { header: header as BinaryFrame['header'], data: frame.subarray(4 + n) };
}
