import { z } from 'zod';

/**
 * The frames of the host's document store, as the client library writes and reads them. They
 * travel on a joined connection beside the routed messages and are never routed nor buffered.
 *
 * Client → relay: `append` (keep one entry of a document; `ref` comes back in `appended`) and
 * `catchup` (send what you hold after position `after`). Relay → client: `appended` (the entry
 * is on the host's disk, at position `pos`), `stored` (one page of a catch-up), `caughtup` (the
 * catch-up is complete; `pos` is the host's last position of the document) and `error` frames
 * naming the document (`store_full`, `store_unavailable`, `invalid_message`).
 */

/** Where one piece of an entry too large for a frame sits in its message. */
const partSchema = z.object({
  m: z.string().min(1).max(64),
  i: z.number().int().nonnegative(),
  n: z.number().int().min(2),
});

/** One stored entry as a catch-up page carries it. */
const storedEntrySchema = z.object({
  pos: z.number().int().positive(),
  at: z.number(),
  from: z.union([z.string(), z.number()]).transform(String),
  data: z.string(),
  kc: z.string().optional(),
  covers: z.number().int().nonnegative().optional(),
  part: partSchema.optional(),
});

const appendedSchema = z.object({
  type: z.literal('appended'),
  doc: z.string(),
  ref: z.number().int(),
  pos: z.number().int().positive(),
});
const storedSchema = z.object({
  type: z.literal('stored'),
  doc: z.string(),
  entries: z.array(storedEntrySchema),
});
const caughtUpSchema = z.object({
  type: z.literal('caughtup'),
  doc: z.string(),
  pos: z.number().int().nonnegative(),
});
const storeErrorSchema = z.object({
  type: z.literal('error'),
  code: z.string(),
  message: z.string().default(''),
  doc: z.string(),
  ref: z.number().int().optional(),
});

const storeFrameSchema = z.discriminatedUnion('type', [
  appendedSchema,
  storedSchema,
  caughtUpSchema,
  storeErrorSchema,
]);

export type StoredPart = z.infer<typeof partSchema>;
export type StoredEntry = z.infer<typeof storedEntrySchema>;
/** A frame of the store from the relay; every one names its document. */
export type StoreFrame = z.infer<typeof storeFrameSchema>;

/** An `append` as the client sends it. */
export interface AppendFrame {
  type: 'append';
  doc: string;
  ref: number;
  data: string;
  kc?: string;
  covers?: number;
  part?: StoredPart;
}

/** A `catchup` as the client sends it; `snapshots: false` asks for the raw entries. */
export interface CatchUpFrame {
  type: 'catchup';
  doc: string;
  after: number;
  kc?: string;
  snapshots?: false;
}

const storeTypes = new Set(['appended', 'stored', 'caughtup']);

/**
 * The store frame in a parsed JSON value, undefined when it is none (an error frame without a
 * `doc` is the connection's, not the store's). A store frame of the wrong shape is undefined too.
 */
export function parseStoreFrame(value: Record<string, unknown>): StoreFrame | undefined {
  const type = value.type;
  if (typeof type !== 'string') return undefined;
  if (!storeTypes.has(type) && !(type === 'error' && typeof value.doc === 'string')) {
    return undefined;
  }
  const parsed = storeFrameSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
