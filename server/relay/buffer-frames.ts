import type BetterSqlite3 from 'better-sqlite3';
import { userOfRoom } from '../../protocol/room-id.ts';

/** The scope whose bound made the buffer drop its oldest frames. */
export type BoundScope = 'user' | 'buffer';

/**
 * Bytes one reference (an absent device's row, and its entry in the frame's list of devices)
 * counts for the bounds besides the frame, so that many small broadcasts to many devices are
 * bounded too.
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

/** The oldest stored frames, as a bound reads them to drop them. */
interface FrameRow {
  id: number;
  user: string;
  bytes: number;
  /** The `bufferedDevices` ids the frame was stored for, a JSON array. */
  devices: string;
}

/** A device of a room that has (or had, this run) references: its `bufferedDevices` row. */
interface DeviceSlot {
  id: number;
  room: string;
  device: string;
}

const keyOf = (room: string, device: string) => `${room}\n${device}`;

/** The statements of the frame store, prepared once. */
function prepareStatements(db: BetterSqlite3.Database) {
  // The row may be there already when this run's view of it was lost to a rolled-back read.
  const upsertDevice = db
    .prepare<[string, string], number>(
      `INSERT INTO bufferedDevices (room, device) VALUES (?, ?)
       ON CONFLICT (room, device) DO UPDATE SET device = excluded.device RETURNING id`,
    )
    .pluck();
  const deleteDevice = db.prepare<[number]>('DELETE FROM bufferedDevices WHERE id = ?');
  const insertFrame = db.prepare<[string, number, number, string, string]>(
    'INSERT INTO bufferedFrames (user, refs, bytes, devices, frame) VALUES (?, ?, ?, ?, ?)',
  );
  const insertReference = db.prepare<[number, number]>(
    'INSERT INTO bufferedMessages (device, frame) VALUES (?, ?)',
  );
  const selectReferences = db.prepare<[number, number, number], StoredReference>(
    `SELECT m.frame, f.bytes FROM bufferedMessages m JOIN bufferedFrames f ON f.id = m.frame
     WHERE m.device = ? AND m.frame > ? ORDER BY m.frame LIMIT ?`,
  );
  const selectTexts = db
    .prepare<[number], string>(
      `SELECT f.frame FROM bufferedMessages m JOIN bufferedFrames f ON f.id = m.frame
       WHERE m.device = ? ORDER BY m.frame`,
    )
    .pluck();
  // The frames a device refers to up to a frame id, as a subquery of the statements below.
  const framesUpTo = 'SELECT frame FROM bufferedMessages WHERE device = ? AND frame <= ?';
  /** Frames about to lose their last reference: how many, and their bytes. */
  const selectLastReferences = db.prepare<[number, number], { n: number; bytes: number }>(
    `SELECT count(*) AS n, coalesce(sum(bytes), 0) AS bytes FROM bufferedFrames
     WHERE refs = 1 AND id IN (${framesUpTo})`,
  );
  const decrementRefs = db.prepare<[number, number]>(
    `UPDATE bufferedFrames SET refs = refs - 1 WHERE id IN (${framesUpTo})`,
  );
  const deleteUnreferenced = db.prepare<[number, number]>(
    `DELETE FROM bufferedFrames WHERE refs = 0 AND id IN (${framesUpTo})`,
  );
  const deleteReferencesUpTo = db.prepare<[number, number]>(
    'DELETE FROM bufferedMessages WHERE device = ? AND frame <= ?',
  );
  // The references a frame still has among the devices it was stored for.
  const deleteReferencesOfFrame = db
    .prepare<[number, string], number>(
      `DELETE FROM bufferedMessages
       WHERE frame = ? AND device IN (SELECT value FROM json_each(?)) RETURNING device`,
    )
    .pluck();
  const oldestOfUser = db.prepare<[string, number], FrameRow>(
    'SELECT id, user, bytes, devices FROM bufferedFrames WHERE user = ? ORDER BY id LIMIT ?',
  );
  const oldest = db.prepare<[number], FrameRow>(
    'SELECT id, user, bytes, devices FROM bufferedFrames ORDER BY id LIMIT ?',
  );
  const deleteFrame = db.prepare<[number]>('DELETE FROM bufferedFrames WHERE id = ?');
  return {
    upsertDevice,
    deleteDevice,
    insertFrame,
    insertReference,
    selectReferences,
    selectTexts,
    selectLastReferences,
    decrementRefs,
    deleteUnreferenced,
    deleteReferencesUpTo,
    deleteReferencesOfFrame,
    oldestOfUser,
    oldest,
    deleteFrame,
  };
}

/**
 * The stored frames and their references, with the bytes they count per user and in all: each
 * frame once (its text plus a fixed overhead) and each reference by `referenceCost`. A frame row
 * counts its references (`refs`) and is deleted with the last one. Every call runs inside the
 * caller's transaction; after one that rolled back, `load` reads everything again.
 */
export class FrameStore {
  readonly #db: BetterSqlite3.Database;
  readonly #bounds: FrameStoreBounds;
  readonly #lost: LostToBound;
  readonly #sql: ReturnType<typeof prepareStatements>;
  /** The `bufferedDevices` rows, by room and device and by id. */
  readonly #slots = new Map<string, DeviceSlot>();
  readonly #slotsById = new Map<number, DeviceSlot>();
  readonly #perUser = new Map<string, number>();
  #total = 0;
  #stored = 0;

  constructor(db: BetterSqlite3.Database, bounds: FrameStoreBounds, lost: LostToBound) {
    this.#db = db;
    this.#bounds = bounds;
    this.#lost = lost;
    this.#sql = prepareStatements(db);
    this.load();
  }

  /** References committed (one per absent device and frame). */
  get stored(): number {
    return this.#stored;
  }

  /** Bytes counted for the whole bound. */
  get bytes(): number {
    return this.#total;
  }

  #remember(slot: DeviceSlot): DeviceSlot {
    this.#slots.set(keyOf(slot.room, slot.device), slot);
    this.#slotsById.set(slot.id, slot);
    return slot;
  }

  #slotFor(room: string, device: string): DeviceSlot {
    const known = this.#slots.get(keyOf(room, device));
    if (known !== undefined) return known;
    const id = this.#sql.upsertDevice.get(room, device);
    if (id === undefined) throw new Error(`no bufferedDevices row for ${room} ${device}`);
    return this.#remember({ id, room, device });
  }

  #account(user: string, bytes: number): void {
    const left = (this.#perUser.get(user) ?? 0) + bytes;
    if (left > 0) this.#perUser.set(user, left);
    else this.#perUser.delete(user);
    this.#total += bytes;
  }

  /** Reads every slot and count again (at open, and after a transaction rolled back). */
  load(): void {
    const db = this.#db;
    this.#slots.clear();
    this.#slotsById.clear();
    this.#perUser.clear();
    this.#total = 0;
    this.#stored = 0;
    const devices = db.prepare<[], DeviceSlot>('SELECT id, room, device FROM bufferedDevices');
    for (const slot of devices.all()) this.#remember(slot);
    const frames = db.prepare<[], { user: string; bytes: number; n: number }>(
      'SELECT user, sum(bytes) AS bytes, count(*) AS n FROM bufferedFrames GROUP BY user',
    );
    for (const row of frames.all()) this.#account(row.user, row.bytes + row.n * frameOverhead);
    const references = db.prepare<[], { device: number; n: number }>(
      'SELECT device, count(*) AS n FROM bufferedMessages GROUP BY device',
    );
    for (const row of references.all()) {
      const slot = this.#slotsById.get(row.device);
      if (slot === undefined) continue;
      this.#account(userOfRoom(slot.room), row.n * referenceCost(slot.room, slot.device));
      this.#stored += row.n;
    }
  }

  /**
   * Drops one whole frame and every reference to it (found through the devices it was stored
   * for); each device that still had it loses it.
   */
  #evict(scope: BoundScope, frame: FrameRow): void {
    const devices = this.#sql.deleteReferencesOfFrame.all(frame.id, frame.devices);
    this.#sql.deleteFrame.run(frame.id);
    let freed = frame.bytes + frameOverhead;
    for (const id of devices) {
      const slot = this.#slotsById.get(id);
      if (slot === undefined) continue;
      freed += referenceCost(slot.room, slot.device);
      this.#lost(scope, slot.room, slot.device, frame.bytes);
    }
    this.#stored -= devices.length;
    this.#account(frame.user, -freed);
  }

  /** Drops the oldest frames of the scope until `cost` more bytes fit in it. */
  #makeRoomIn(scope: BoundScope, user: string, cost: number): void {
    const bound = scope === 'user' ? this.#bounds.userMaxBytes : this.#bounds.maxBytes;
    const used = () => (scope === 'user' ? (this.#perUser.get(user) ?? 0) : this.#total);
    const { oldestOfUser, oldest } = this.#sql;
    // Usually one or two frames make room: read a few, more if that was not enough.
    let batchSize = 4;
    while (used() + cost > bound) {
      const batch = scope === 'user' ? oldestOfUser.all(user, batchSize) : oldest.all(batchSize);
      if (batch.length === 0) return;
      for (const frame of batch) {
        if (used() + cost <= bound) return;
        this.#evict(scope, frame);
      }
      batchSize = Math.min(batchSize * 4, 256);
    }
  }

  /** The references of a device, oldest first, with their frame's bytes. */
  referencesOf(room: string, device: string): StoredReference[] {
    const slot = this.#slots.get(keyOf(room, device));
    return slot === undefined
      ? []
      : this.#sql.selectReferences.all(slot.id, -1, Number.MAX_SAFE_INTEGER);
  }

  /**
   * The oldest references a device must lose to shed `messages` references and `bytes` bytes
   * (either may be 0 or less): the id of the last one (-1: none) and their bytes. Reads only as
   * far as that, a page at a time: a device at its cap loses one or a few per commit.
   */
  oldestBeyond(
    room: string,
    device: string,
    messages: number,
    bytes: number,
  ): { upTo: number; bytes: number } {
    const slot = this.#slots.get(keyOf(room, device));
    const excess = { upTo: -1, bytes: 0 };
    while (slot !== undefined && (messages > 0 || bytes > 0)) {
      const page = this.#sql.selectReferences.all(slot.id, excess.upTo, Math.max(messages, 16));
      for (const row of page) {
        if (messages <= 0 && bytes <= 0) break;
        excess.upTo = row.frame;
        excess.bytes += row.bytes;
        messages--;
        bytes -= row.bytes;
      }
      if (page.length === 0) break;
    }
    return excess;
  }

  /** The frame texts kept for a device, in order. */
  textsOf(room: string, device: string): string[] {
    const slot = this.#slots.get(keyOf(room, device));
    return slot === undefined ? [] : this.#sql.selectTexts.all(slot.id);
  }

  /**
   * Deletes a device's references up to frame id `upTo` (every one when undefined, and then its
   * `bufferedDevices` row too), takes each off its frame's count and deletes the frames left
   * with none. Returns how many references went.
   */
  release(room: string, device: string, upTo?: number): number {
    const sql = this.#sql;
    const slot = this.#slots.get(keyOf(room, device));
    if (slot === undefined) return 0;
    const last = upTo ?? Number.MAX_SAFE_INTEGER;
    const orphaned = sql.selectLastReferences.get(slot.id, last) ?? { n: 0, bytes: 0 };
    sql.decrementRefs.run(slot.id, last);
    sql.deleteUnreferenced.run(slot.id, last);
    const count = sql.deleteReferencesUpTo.run(slot.id, last).changes;
    if (upTo === undefined) {
      sql.deleteDevice.run(slot.id);
      this.#slots.delete(keyOf(room, device));
      this.#slotsById.delete(slot.id);
    }
    this.#stored -= count;
    const freed = count * referenceCost(room, device) + orphaned.bytes + orphaned.n * frameOverhead;
    if (freed > 0) this.#account(userOfRoom(room), -freed);
    return count;
  }

  /** Deletes a device's references in every room. */
  releaseEverywhere(device: string): number {
    let count = 0;
    for (const slot of [...this.#slotsById.values()]) {
      if (slot.device === device) count += this.release(slot.room, device);
    }
    return count;
  }

  /**
   * Stores a frame once with a reference for each target (all of one room), after dropping
   * the oldest frames of the user and of the whole buffer as far as needed for it to fit. A
   * frame larger than a bound is not stored: every target loses it.
   */
  insert(
    frame: string,
    bytes: number,
    targets: ReadonlyArray<{ room: string; device: string }>,
  ): void {
    const first = targets[0];
    if (first === undefined) return;
    const bounds = this.#bounds;
    const room = first.room;
    const user = userOfRoom(room);
    let cost = bytes + frameOverhead;
    for (const target of targets) cost += referenceCost(room, target.device);
    const tooBig: BoundScope | undefined =
      cost > bounds.userMaxBytes ? 'user' : cost > bounds.maxBytes ? 'buffer' : undefined;
    if (tooBig !== undefined) {
      for (const target of targets) this.#lost(tooBig, room, target.device, bytes);
      return;
    }
    this.#makeRoomIn('user', user, cost);
    this.#makeRoomIn('buffer', user, cost);
    const ids = targets.map((target) => this.#slotFor(room, target.device).id);
    const id = Number(
      this.#sql.insertFrame.run(user, ids.length, bytes, JSON.stringify(ids), frame)
        .lastInsertRowid,
    );
    for (const device of ids) this.#sql.insertReference.run(device, id);
    this.#stored += targets.length;
    this.#account(user, cost);
  }
}
