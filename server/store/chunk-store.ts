import { userOfRoom } from '../../protocol/room-id.ts';

/**
 * The chunks of the projects' files (docs/store.md, "Chunks"): content-addressed pieces of the
 * files a folder sync carries beside its documents, kept in the same store (store.db, or the
 * cluster's PostgreSQL database) and counted against the same bounds. A chunk is keyed by its
 * room, the key check value it was sealed under (`""` when it is not encrypted) and its id, so a
 * device with another passphrase cannot replace what the others stored under theirs.
 *
 * Both stores implement it and pass one contract suite (`test/store/chunk-contract.test.ts`).
 */
export interface ChunkStore {
  /**
   * Keeps one chunk. Resolves once it is durable, with `stored` (`already`: it was held, nothing
   * was counted again; it is marked used now) or the bound it would pass. Rejects when it could
   * not be written.
   */
  put(chunk: NewChunk): Promise<PutOutcome>;
  /** The ids among `ids` held in the room under `kc` (`""`: unencrypted); marks them used now. */
  have(room: string, kc: string, ids: readonly string[]): Promise<string[]>;
  /** A chunk's bytes as they were put; undefined when it is not held. */
  get(room: string, kc: string, id: string): Promise<Buffer | undefined>;
  /**
   * Drops one chunk found damaged (`chunk-bad`), so it counts as missing and its device puts it
   * again; with `only`, just when its bytes are still exactly those (the damaged copy that was
   * checked, never one put again since). Its bytes no longer count against the bounds. True when
   * a row was dropped.
   */
  drop(room: string, kc: string, id: string, only?: Buffer): Promise<boolean>;
  /**
   * Keeps a device's latest count of a folder's files: one per room and folder document, a new
   * one replacing it. Counted against the bounds (`reportBytes`); refused, changing nothing, past
   * a bound (`user`, `store`), over `maxReportBytes` (`size`), or as a new folder document of a
   * room that holds `maxReportsPerRoom` already (`reports`).
   */
  report(report: FolderReport): Promise<ReportOutcome>;
  /** The names of one folder's latest report; undefined when none is kept (or encrypted). */
  reportNames(room: string, doc: string): Promise<string[] | undefined>;
  /** Bytes the chunks count against the bounds, as last counted (for `/metrics`). */
  bytes(): number;
}

/** A chunk to keep, as a device sent it. */
export interface NewChunk {
  room: string;
  /** The key check value it was sealed under; `""` when it is not encrypted. */
  kc: string;
  id: string;
  data: Buffer;
}

export type PutOutcome = { stored: true; already: boolean } | { full: 'user' | 'store' };

/** A device's count of the live files of one synced folder. */
export interface FolderReport {
  room: string;
  /** The folder document's doc key. */
  doc: string;
  /** The reporting device's key. */
  device: string;
  files: number;
  bytes: number;
  encrypted: boolean;
  /** The files' paths; only when not encrypted. */
  names?: string[] | undefined;
  /** When the host received it, ms since the epoch. */
  at: number;
}

export type ReportOutcome = { stored: true } | { full: 'user' | 'store' | 'size' | 'reports' };

/** A folder report as usage lists it: without its names, with how many it holds. */
export type ReportSummary = Omit<FolderReport, 'room' | 'names'> & { named: number };

/** What one room's chunks and folder reports come to (in `StoreUsage`). */
export interface RoomChunks {
  chunks: number;
  chunkBytes: number;
  /** What the room's folder reports count against the bounds. */
  reportBytes: number;
  folders: ReportSummary[];
}

/** What one chunk counts against the bounds: its bytes and a fixed overhead for its row. */
export function chunkBytes(chunk: { data: Buffer; id: string; kc: string }): number {
  return chunk.data.length + 64 + chunk.id.length + chunk.kc.length;
}

/** A chunk not asked about (`chunk-have`, `chunk-get`, `chunk-put`) for this long is dropped. */
export function unusedChunkMs(historyKeepMs: number): number {
  return historyKeepMs + 24 * 60 * 60 * 1_000;
}

type DocumentUsage = { room: string; user: string; documents: number; bytes: number };

/**
 * The rooms of a store's usage: each room's documents with its chunks and folder reports (a room
 * with chunks only has 0 documents); `bytes` counts both. In order of user, then room.
 */
export function roomsWithChunks(
  documents: readonly DocumentUsage[],
  chunks: ReadonlyMap<string, RoomChunks & { user: string }>,
): Array<DocumentUsage & RoomChunks> {
  const rooms = new Map<string, DocumentUsage & RoomChunks>();
  for (const row of documents) {
    rooms.set(row.room, { ...row, chunks: 0, chunkBytes: 0, reportBytes: 0, folders: [] });
  }
  for (const [room, kept] of chunks) {
    const row = rooms.get(room) ?? { room, user: kept.user, documents: 0, bytes: 0 };
    rooms.set(room, {
      ...row,
      bytes: row.bytes + kept.chunkBytes + kept.reportBytes,
      chunks: kept.chunks,
      chunkBytes: kept.chunkBytes,
      reportBytes: kept.reportBytes,
      folders: [...kept.folders].sort((a, b) => (a.doc < b.doc ? -1 : a.doc > b.doc ? 1 : 0)),
    });
  }
  const order = (a: DocumentUsage, b: DocumentUsage) =>
    a.user === b.user ? (a.room < b.room ? -1 : 1) : a.user < b.user ? -1 : 1;
  return [...rooms.values()].sort(order);
}

/** Chunks and folder reports per room, from the rows a store read (see `RoomChunks`). */
export function roomChunksOf(
  counts: ReadonlyArray<{ room: string; chunks: number; bytes: number }>,
  reports: ReadonlyArray<ReportSummary & { room: string; counted: number }>,
): Map<string, RoomChunks & { user: string }> {
  const rooms = new Map<string, RoomChunks & { user: string }>();
  const of = (room: string) => {
    let found = rooms.get(room);
    if (found === undefined) {
      found = { user: userOfRoom(room), chunks: 0, chunkBytes: 0, reportBytes: 0, folders: [] };
      rooms.set(room, found);
    }
    return found;
  };
  for (const row of counts)
    Object.assign(of(row.room), { chunks: row.chunks, chunkBytes: row.bytes });
  for (const { room, counted, ...report } of reports) {
    const kept = of(room);
    kept.folders.push(report);
    kept.reportBytes += counted;
  }
  return rooms;
}
