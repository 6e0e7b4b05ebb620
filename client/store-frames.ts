import type { z } from 'zod';
import {
  type AppendFrame,
  type CatchupFrame,
  type ChunkBadFrame,
  type ChunkGetFrame,
  type ChunkHaveFrame,
  type ChunkPutFrame,
  type FolderReportFrame,
  relayFrameSchemas,
  wireDeviceId,
} from '../protocol/relay-frames.ts';

/**
 * The frames of the host's store (docs/store.md), both ways: what a device asks the relay itself
 * (never routed nor buffered) and how its answers are told apart from the room's frames.
 */

const frames = relayFrameSchemas(wireDeviceId.transform(String));
const { error: errorSchema, control: controlSchema } = frames;
const { appended: appendedSchema, stored: storedSchema, caughtup: caughtupSchema } = frames;
const { chunkStored, chunkHeld, chunk, chunkDropped, chunksLost } = frames;

/** A frame whose `data` is sent apart from it, as bytes written last (`sendStoreFrame`). */
export type WithoutData<F> = F extends { data: string } ? Omit<F, 'data'> : never;

/** What a device sends to the host's store: documents (`append`, `catchup`) and chunks. */
export type HostRequest =
  | AppendFrame
  | CatchupFrame
  | ChunkPutFrame
  | ChunkHaveFrame
  | ChunkGetFrame
  | ChunkBadFrame
  | FolderReportFrame;

export type ErrorFrame = z.infer<typeof errorSchema>;

/**
 * The host's document store answers `append` and `catchup` with `appended` (the entry is on the
 * host's disk at `pos`), `stored` (one page of a catch-up), `caughtup` (complete; `pos` is the
 * host's last position of the document) and the `error` frames that name a document
 * (`store_full`, `store_unavailable`, `invalid_message`).
 */
export type StoredFrame = z.infer<typeof storedSchema>;
export type StoredEntry = StoredFrame['entries'][number];
export type StoreFrame =
  | z.infer<typeof appendedSchema>
  | StoredFrame
  | z.infer<typeof caughtupSchema>
  | (ErrorFrame & { doc: string });

/**
 * The answers to chunk frames: `chunk-stored`, `chunk-held`, `chunk`, `chunk-dropped`, and the
 * `error` frames that name a `ref` but no document (`store_full`, `store_unavailable`,
 * `invalid_message`, `chunk_missing`); and `chunks-lost`, which answers nothing of this device's
 * (another device's `chunk-bad`) and has no `ref`.
 */
export type ChunkAnswer =
  | z.infer<typeof chunkStored>
  | z.infer<typeof chunkHeld>
  | (z.infer<typeof chunk> & { decoded?: Uint8Array<ArrayBuffer> })
  | z.infer<typeof chunkDropped>
  | z.infer<typeof chunksLost>
  | (ErrorFrame & { ref: number });

type ControlFrame = z.infer<typeof controlSchema>;

/** A frame of the store, as the connection emits it, or the other frames of the relay. */
export type SortedFrame =
  | { type: 'store'; frame: StoreFrame }
  | { type: 'chunk'; frame: ChunkAnswer }
  | Exclude<ControlFrame, StoreFrame | ChunkAnswer>;

/**
 * Parses a frame with a `type` and sorts out the store's answers; undefined for a frame of
 * unknown shape.
 */
export function sortControlFrame(value: object): SortedFrame | undefined {
  const control = controlSchema.safeParse(value);
  if (!control.success) return undefined;
  const frame = control.data;
  if (frame.type === 'appended' || frame.type === 'stored' || frame.type === 'caughtup') {
    return { type: 'store', frame };
  }
  switch (frame.type) {
    case 'chunk-stored':
    case 'chunk-held':
    case 'chunk':
    case 'chunk-dropped':
    case 'chunks-lost':
      return { type: 'chunk', frame };
  }
  if (frame.type === 'error' && frame.doc !== undefined) {
    return { type: 'store', frame: { ...frame, doc: frame.doc } };
  }
  if (frame.type === 'error' && frame.ref !== undefined) {
    return { type: 'chunk', frame: { ...frame, ref: frame.ref } };
  }
  return frame as Exclude<ControlFrame, StoreFrame | ChunkAnswer>;
}

/**
 * Room in a frame for what surrounds an entry's data, as the host sends it back in a catch-up
 * page (position, time, sender, `kc`, `covers`, `part`) and as it comes in an `append`.
 */
const entryOverheadBytes = 1024;
const encoder = new TextEncoder();

/**
 * Largest number of (sealed) bytes one stored entry carries: its page back from the host must
 * fit `message.maxBytes` with the base64 data and the entry's fields.
 */
export function storeChunkBytes(maxMessageBytes: number, docKey: string): number {
  const room = maxMessageBytes - entryOverheadBytes - 2 * encoder.encode(docKey).length;
  return Math.max(3, Math.floor(room / 4) * 3);
}
