import type { Piece } from '../../protocol/relay-frames.ts';
import type { ChunkStore, RoomChunks } from './chunk-store.ts';

/**
 * The document store: what the host keeps of the projects' documents, so that a device catches up
 * from the host alone (docs/store.md). A document is one provider document in one relay room,
 * named by its key (the provider's name, or a keyed digest of it when the project is encrypted);
 * the host keeps its entries in order, each with a position (1, 2, 3, ... per document, never
 * reused), as opaque bytes it cannot read when the project is encrypted.
 *
 * The single-node relay keeps them in SQLite beside its buffer (`sqlite-store.ts`); a cluster
 * store implements the same interface, and both pass one contract suite
 * (`test/store/store-contract.test.ts`). Every method may complete later (a cluster store waits
 * for its engine); the SQLite one batches the appends of one event-loop turn into one commit.
 */
export interface DocumentStore {
  /**
   * Stores one entry at the end of its document. Resolves once it is durable (it survives a
   * `kill -9` of the process) with its position, or with the bound it would pass (nothing is
   * stored then). Rejects when it could not be written (the entry is not stored).
   */
  append(entry: NewEntry): Promise<AppendOutcome>;
  /**
   * Entries of a document with a position above `after`, in order, up to about `maxBytes` of
   * data (at least one when there is any), and the last position the document has.
   */
  read(room: string, doc: string, after: number, maxBytes: number): Promise<EntryPage>;
  /**
   * The newest whole snapshot of a document whose key check value is `kc` (undefined: the
   * unencrypted ones) and that covers a position above `after`: its entry, or its pieces in
   * order when it was sent in pieces; empty when there is none.
   */
  newestSnapshot(
    room: string,
    doc: string,
    kc: string | undefined,
    after: number,
  ): Promise<StoredEntry[]>;
  /**
   * The distinct key check values of the entries kept in a room, of every document, in order
   * (entries without one, not encrypted, are not named): which keys the room's devices wrote
   * under (a catch-up with `keys`).
   */
  keyChecks(room: string): Promise<string[]>;
  /** The chunks of the rooms' files, kept beside the documents and counted with them. */
  readonly chunks: ChunkStore;
  /** Bytes kept, per user and room (entries' and chunks' data plus a fixed overhead each). */
  usage(): Promise<StoreUsage>;
  /** Bytes kept in the whole store, as last counted (for `/metrics`). */
  bytes(): number;
  /** Removes every document, chunk and folder report of a room (its project was deleted). */
  deleteRoom(room: string): Promise<void>;
  /** Removes every document, chunk and folder report of a user's rooms (the user was deleted). */
  deleteUser(user: string): Promise<void>;
  /** Rooms that hold documents, chunks or folder reports. */
  rooms(): Promise<string[]>;
  /**
   * Drops what snapshots cover and the history no longer needs (see `compaction.ts`) and the
   * chunks unused for longer than the history window (`unusedChunkMs`), and hands the freed
   * space back to the file system. `now` in ms.
   */
  compact(now: number): Promise<CompactionReport>;
  /** Writes what is queued, then releases the store. */
  close(): Promise<void>;
}

/** An entry to store, as a device sent it. */
export interface NewEntry {
  room: string;
  doc: string;
  /** The sender's device key. */
  device: string;
  /** The entry's bytes (sealed when the project is encrypted). */
  data: Buffer;
  kc?: string | undefined;
  covers?: number | undefined;
  part?: Piece | undefined;
  /** Kept for the whole history window, whatever covers it (a version just before a delete). */
  keep?: boolean | undefined;
}

/** An entry as the store keeps it. */
export interface StoredEntry {
  pos: number;
  /** When the host stored it, ms since the epoch. */
  at: number;
  device: string;
  data: Buffer;
  kc?: string | undefined;
  covers?: number | undefined;
  part?: Piece | undefined;
  keep?: boolean | undefined;
}

/** `pos`: stored at that position. `full`: refused, past the user's bound or the store's. */
export type AppendOutcome = { pos: number } | { full: 'user' | 'store' };

export interface EntryPage {
  entries: StoredEntry[];
  /** The last position the document has (0: none yet). */
  lastPos: number;
}

export interface StoreUsage {
  /** Bytes of the whole store. */
  bytes: number;
  /** The store's bounds. */
  bounds: StoreBounds;
  /** `bytes`: the room's documents, chunks and folder reports, as counted against the bounds. */
  rooms: Array<{ room: string; user: string; documents: number; bytes: number } & RoomChunks>;
}

export interface CompactionReport {
  /** Entries dropped. */
  dropped: number;
  /** Bytes of the entries dropped. */
  bytes: number;
  /** Chunks dropped, unused for longer than the history window. */
  chunks?: number;
}

/** The bounds on what the store keeps (relay.conf `store.*`). */
export interface StoreBounds {
  /** Bytes of one user's documents. */
  userMaxBytes: number;
  /** Bytes of the whole store. */
  maxBytes: number;
}

/** What one entry counts against the bounds: its data and a fixed overhead for its row. */
export function entryBytes(entry: {
  data: Buffer;
  device: string;
  kc?: string | undefined;
}): number {
  return entry.data.length + 64 + entry.device.length + (entry.kc?.length ?? 0);
}
