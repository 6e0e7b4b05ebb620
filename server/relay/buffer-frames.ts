import type BetterSqlite3 from 'better-sqlite3';
import { userOfRoom } from './buffer-store.ts';

/** The scope whose bound made the buffer drop its oldest frames. */
export type BoundScope = 'user' | 'buffer';

/**
 * Bytes one reference (an absent device's row and its index entry) counts for the bounds
 * besides the frame, so that many small broadcasts to many devices are bounded too.
 */
export function referenceCost(room: string, device: string): number {
  return 2 * (Buffer.byteLength(room) + Buffer.byteLength(device)) + 32;
}

/** Bytes a frame row counts for the bounds besides its text. */
const frameOverhead = 32;

/** One frame kept for a device: its id (which gives the order) and its bytes. */
export interface StoredReference {
  frame: number;
  bytes: number;
}

export interface FrameStoreBounds {
  /** `buffer.maxBytes`: the whole buffer. */
  maxBytes: number;
  /** `buffer.userMaxBytes`: the frames of one user's rooms. */
  userMaxBytes: number;
}

/** A device lost one frame to a bound (its oldest, or the one that could not be stored). */
export type LostToBound = (scope: BoundScope, room: string, device: string, bytes: number) => void;

/**
 * The stored frames and their references, with the bytes they count per user and in all: each
 * frame once (its text plus a fixed overhead) and each reference by `referenceCost`. Every call
 * runs inside the caller's transaction.
 */
export function createFrameStore(
  db: BetterSqlite3.Database,
  bounds: FrameStoreBounds,
  lost: LostToBound,
) {
  const insertFrame = db.prepare<[string, string, number]>(
    'INSERT INTO bufferedFrames (user, frame, bytes) VALUES (?, ?, ?)',
  );
  const insertReference = db.prepare<[string, string, number]>(
    'INSERT INTO bufferedMessages (room, device, frame) VALUES (?, ?, ?)',
  );
  const selectReferences = db.prepare<[string, string], StoredReference>(
    `SELECT m.frame, f.bytes FROM bufferedMessages m JOIN bufferedFrames f ON f.id = m.frame
     WHERE m.room = ? AND m.device = ? ORDER BY m.frame`,
  );
  const selectTexts = db
    .prepare<[string, string], string>(
      `SELECT f.frame FROM bufferedMessages m JOIN bufferedFrames f ON f.id = m.frame
       WHERE m.room = ? AND m.device = ? ORDER BY m.frame`,
    )
    .pluck();
  const deleteReferencesUpTo = db.prepare<[string, string, number]>(
    'DELETE FROM bufferedMessages WHERE room = ? AND device = ? AND frame <= ?',
  );
  const deleteOrphan = db.prepare<[number, number]>(
    'DELETE FROM bufferedFrames WHERE id = ? AND NOT EXISTS (SELECT 1 FROM bufferedMessages WHERE frame = ?)',
  );
  const roomsOfDevice = db
    .prepare<[string], string>('SELECT DISTINCT room FROM bufferedMessages WHERE device = ?')
    .pluck();
  const oldestOfUser = db.prepare<[string], { id: number; user: string; bytes: number }>(
    'SELECT id, user, bytes FROM bufferedFrames WHERE user = ? ORDER BY id LIMIT 64',
  );
  const oldest = db.prepare<[], { id: number; user: string; bytes: number }>(
    'SELECT id, user, bytes FROM bufferedFrames ORDER BY id LIMIT 64',
  );
  const referencesOfFrame = db.prepare<[number], { room: string; device: string }>(
    'SELECT room, device FROM bufferedMessages WHERE frame = ?',
  );
  const deleteReferencesOfFrame = db.prepare<[number]>(
    'DELETE FROM bufferedMessages WHERE frame = ?',
  );
  const deleteFrame = db.prepare<[number]>('DELETE FROM bufferedFrames WHERE id = ?');

  const perUser = new Map<string, number>();
  let total = 0;
  let stored = 0;

  function account(user: string, bytes: number): void {
    const left = (perUser.get(user) ?? 0) + bytes;
    if (left > 0) perUser.set(user, left);
    else perUser.delete(user);
    total += bytes;
  }

  function load(): void {
    perUser.clear();
    total = 0;
    stored = 0;
    const frames = db.prepare<[], { user: string; bytes: number; n: number }>(
      'SELECT user, sum(bytes) AS bytes, count(*) AS n FROM bufferedFrames GROUP BY user',
    );
    for (const row of frames.all()) account(row.user, row.bytes + row.n * frameOverhead);
    const references = db.prepare<[], { room: string; device: string; n: number }>(
      'SELECT room, device, count(*) AS n FROM bufferedMessages GROUP BY room, device',
    );
    for (const row of references.all()) {
      account(userOfRoom(row.room), row.n * referenceCost(row.room, row.device));
      stored += row.n;
    }
  }

  /** Drops one whole frame and every reference to it; each device that had it loses it. */
  function evict(scope: BoundScope, frame: { id: number; user: string; bytes: number }): void {
    const references = referencesOfFrame.all(frame.id);
    deleteReferencesOfFrame.run(frame.id);
    deleteFrame.run(frame.id);
    let freed = frame.bytes + frameOverhead;
    for (const { room, device } of references) {
      freed += referenceCost(room, device);
      lost(scope, room, device, frame.bytes);
    }
    stored -= references.length;
    account(frame.user, -freed);
  }

  /** Drops the oldest frames of the scope until `cost` more bytes fit in it. */
  function makeRoomIn(scope: BoundScope, user: string, cost: number): void {
    const bound = scope === 'user' ? bounds.userMaxBytes : bounds.maxBytes;
    const used = () => (scope === 'user' ? (perUser.get(user) ?? 0) : total);
    while (used() + cost > bound) {
      const batch = scope === 'user' ? oldestOfUser.all(user) : oldest.all();
      if (batch.length === 0) return;
      for (const frame of batch) {
        if (used() + cost <= bound) return;
        evict(scope, frame);
      }
    }
  }

  load();

  return {
    /** References committed (one per absent device and frame). */
    get stored(): number {
      return stored;
    },
    /** Bytes counted for the whole bound. */
    get bytes(): number {
      return total;
    },
    /** Recounts from the database (after a rolled-back transaction). */
    load,
    /** The references of a device, oldest first, with their frame's bytes. */
    referencesOf: (room: string, device: string): StoredReference[] =>
      selectReferences.all(room, device),
    /** The frame texts kept for a device, in order. */
    textsOf: (room: string, device: string): string[] => selectTexts.all(room, device),

    /**
     * Deletes a device's references up to frame id `upTo` (every one when undefined) and the frames
     * that no device references any more. Returns how many references went.
     */
    release(room: string, device: string, upTo = Number.MAX_SAFE_INTEGER): number {
      const references = selectReferences.all(room, device).filter((r) => r.frame <= upTo);
      if (references.length === 0) return 0;
      deleteReferencesUpTo.run(room, device, upTo);
      let freed = references.length * referenceCost(room, device);
      for (const reference of references) {
        if (deleteOrphan.run(reference.frame, reference.frame).changes > 0) {
          freed += reference.bytes + frameOverhead;
        }
      }
      stored -= references.length;
      account(userOfRoom(room), -freed);
      return references.length;
    },

    /** Deletes a device's references in every room. */
    releaseEverywhere(device: string): number {
      let count = 0;
      for (const room of roomsOfDevice.all(device)) count += this.release(room, device);
      return count;
    },

    /**
     * Stores a frame once with a reference for each target, after dropping the oldest frames of
     * the user and of the whole buffer as far as needed for it to fit. A frame larger than a
     * bound is not stored: every target loses it.
     */
    insert(frame: string, bytes: number, targets: ReadonlyArray<{ room: string; device: string }>) {
      const first = targets[0];
      if (first === undefined) return;
      const user = userOfRoom(first.room);
      let cost = bytes + frameOverhead;
      for (const { room, device } of targets) cost += referenceCost(room, device);
      const tooBig: BoundScope | undefined =
        cost > bounds.userMaxBytes ? 'user' : cost > bounds.maxBytes ? 'buffer' : undefined;
      if (tooBig !== undefined) {
        for (const { room, device } of targets) lost(tooBig, room, device, bytes);
        return;
      }
      makeRoomIn('user', user, cost);
      makeRoomIn('buffer', user, cost);
      const id = Number(insertFrame.run(user, frame, bytes).lastInsertRowid);
      for (const { room, device } of targets) insertReference.run(room, device, id);
      stored += targets.length;
      account(user, cost);
    },
  };
}

export type FrameStore = ReturnType<typeof createFrameStore>;
