import { z } from 'zod';
import { base64Schema, docKeySchema, keyCheckSchema } from './relay-frames.ts';

/**
 * The chunk frames of the host's store (docs/store.md): a file that is not merged as text travels
 * as content-addressed chunks the host keeps per room and key check value. JSON text frames on a
 * joined relay connection, answered by the relay itself, never routed nor buffered.
 */

/** Chunk ids a `chunk-have` may ask about at once. */
export const maxChunkHaveIds = 1000;
/** Paths a `folder-report` may list. */
export const maxReportNames = 2000;
/** Plaintext bytes of one chunk at most (its base64 frame stays well under 1 MiB). */
export const maxChunkBytes = 262_144;

/**
 * A chunk id: `"s"` + base64url(SHA-256(bytes)) for a chunk stored in the clear (the relay checks
 * it), `"h"` + base64url(HMAC-SHA-256(chunk key, plaintext)) for a sealed one (only a device with
 * the key can check it). 44 characters either way.
 */
export const chunkIdSchema = z.string().regex(/^[sh][A-Za-z0-9_-]{43}$/, {
  error: 'must be a chunk id ("s" or "h" and 43 base64url characters)',
});

const refSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const countSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

// ---- client → relay ----

/** Keeps one chunk of the room; answered `chunk-stored` (at once when the id is held already). */
export const chunkPutSchema = z.object({
  type: z.literal('chunk-put'),
  ref: refSchema,
  id: chunkIdSchema,
  /** The chunk's bytes as sent (ciphertext when sealed), standard base64. */
  data: base64Schema,
  /** As for `append`: the sealing key's check value and store proof. */
  kc: keyCheckSchema.optional(),
  kp: z.string().max(64).optional(),
});

/** Which of `ids` the host holds (under `kc`); marks them used now. */
export const chunkHaveSchema = z.object({
  type: z.literal('chunk-have'),
  ref: refSchema,
  ids: z.array(chunkIdSchema).max(maxChunkHaveIds),
  kc: keyCheckSchema.optional(),
});

/** Fetches one chunk. */
export const chunkGetSchema = z.object({
  type: z.literal('chunk-get'),
  ref: refSchema,
  id: chunkIdSchema,
  kc: keyCheckSchema.optional(),
});

/**
 * A device's count of the live files of a synced folder (`doc`: the folder document's doc key)
 * and their bytes; `names` only when the project is not encrypted. No answer.
 */
export const folderReportSchema = z.object({
  type: z.literal('folder-report'),
  doc: docKeySchema,
  files: countSchema,
  bytes: countSchema,
  encrypted: z.boolean(),
  names: z.array(z.string().max(4096)).max(maxReportNames).optional(),
});

export type ChunkPutFrame = z.infer<typeof chunkPutSchema>;
export type ChunkHaveFrame = z.infer<typeof chunkHaveSchema>;
export type ChunkGetFrame = z.infer<typeof chunkGetSchema>;
export type FolderReportFrame = z.infer<typeof folderReportSchema>;

// ---- relay → client ----

/** The chunk sent with `ref` is kept by the host (committed). */
export const chunkStoredSchema = z.object({
  type: z.literal('chunk-stored'),
  ref: z.number(),
  id: z.string(),
});

/** The ids of a `chunk-have` that the host holds. */
export const chunkHeldSchema = z.object({
  type: z.literal('chunk-held'),
  ref: z.number(),
  ids: z.array(z.string()),
});

/** One chunk, as it was put (ciphertext when sealed), standard base64. */
export const chunkSchema = z.object({
  type: z.literal('chunk'),
  ref: z.number(),
  id: z.string(),
  data: z.string(),
});

export type ChunkStoredFrame = z.infer<typeof chunkStoredSchema>;
export type ChunkHeldFrame = z.infer<typeof chunkHeldSchema>;
export type ChunkDataFrame = z.infer<typeof chunkSchema>;

/** The answers to chunk frames (their errors are `error` frames with `ref` and no `doc`). */
export const chunkAnswerSchema = z.discriminatedUnion('type', [
  chunkStoredSchema,
  chunkHeldSchema,
  chunkSchema,
]);
