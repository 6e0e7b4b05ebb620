import type { BoundScope } from './buffer-frames.ts';
import type { BufferStoreNotes } from './buffer-store.ts';

// What the durable buffer (buffer.ts) offers the broker, and what it reports to the relay.

/**
 * A device that disconnected without `leave`: while `droppedAt + window` is ahead, every frame
 * addressed to it is stored. The buffer makes, counts and forgets it (`buffer-absent.ts`).
 */
export interface AbsentDevice {
  readonly room: string;
  readonly device: string;
  /** Clock time (ms) of the drop. */
  readonly droppedAt: number;
  /** Frames stored (committed or queued). */
  messages: number;
  bytes: number;
  /** Some frames for it were dropped (a cap or bound, a failed write). */
  gap: boolean;
}

/** The devices the buffer keeps frames for, as the broker reads them. */
export interface AbsentDevices {
  /** Devices kept for, in every room. */
  readonly size: number;
  get(room: string, device: string): AbsentDevice | undefined;
  /** The devices kept for in `room` (one may be expired while this is iterated). */
  inRoom(room: string): IterableIterator<AbsentDevice>;
  countIn(room: string): number;
}

export interface BufferLimits {
  /** `buffer.seconds` in ms. */
  windowMs: number;
  /** `buffer.maxMessages`: per device, oldest dropped beyond it. */
  maxMessages: number;
  /** `buffer.deviceMaxBytes`: per device, oldest dropped beyond it. */
  deviceMaxBytes: number;
  /** `buffer.userMaxBytes`: the rooms of one user, oldest dropped beyond it. */
  userMaxBytes: number;
  /** `buffer.maxBytes`: the whole buffer, oldest dropped beyond it. */
  maxBytes: number;
  /** How long the relay remembers that a device's window expired (so its next join says gap). */
  expiredRetentionMs: number;
}

export interface BufferEvents {
  /** Frames dropped because a device's window expired. */
  droppedExpired(count: number): void;
  /** Frames dropped because a device reached its cap. */
  droppedCap(count: number): void;
  /** Frames dropped (oldest first) to keep a user's rooms or the whole buffer within its bound. */
  droppedBound(scope: BoundScope, count: number): void;
  /** A write transaction committed. */
  flushed(): void;
  /**
   * A write transaction failed (a full disk): `lostFrames` frames for absent devices are dropped
   * (those devices get `gap`); 0 when the engine kept the change in memory (sql.js).
   */
  failed(err: unknown, lostFrames: number): void;
  /** A write succeeded again after failures. */
  recovered(): void;
  /** The health check could not read or write the database. */
  unhealthy(err: unknown): void;
  /**
   * The file was migrated from an earlier layout (its version, the references carried over), or
   * could not be vacuumed once.
   */
  opened(notes: BufferStoreNotes): void;
}

/** The durable buffer: SQLite (WAL), writes queued and committed in one transaction per tick. */
export interface MessageBuffer {
  /**
   * Absent devices of the previous run. Devices still recorded as present (the relay was killed)
   * become absent now; devices whose window already passed are expired.
   */
  restore(now: number): AbsentDevice[];
  /** Device ids revoked earlier, with the Unix second of revocation. */
  revoked(): Map<string, number>;
  /** The devices kept for (made by `markAbsent` and `restore`). */
  readonly absent: AbsentDevices;
  /** Records that a device dropped without leave at `droppedAt`: it is kept for from now on. */
  markAbsent(room: string, device: string, droppedAt: number): AbsentDevice;
  /**
   * Stores a frame for absent devices (committed on the next flush): once, referenced by each.
   */
  append(entries: AbsentDevice[], frame: string, bytes: number): void;
  /** The window of an absent device passed: its frames are dropped, its next join gets `gap`. */
  expire(entry: AbsentDevice, now: number): void;
  /** A device left cleanly: nothing is kept for it in that room. */
  forget(room: string, device: string): void;
  /**
   * The device is present again (its join took over what was kept, or could not read it): no
   * longer kept for.
   */
  present(room: string, device: string): void;
  /** A device was revoked: nothing is kept for it anywhere, and its tokens stay refused. */
  revoke(device: string, revokedAt: number): void;
  /**
   * A device joins: commits the queue, then in one transaction reads its stored frames, hands
   * them to `deliver` in order (always called, maybe with none), deletes them and records the
   * device as present. A crash before the commit delivers them again on the next join; after
   * it, never again.
   */
  takeOver(
    room: string,
    device: string,
    now: number,
    deliver: (frames: string[], gap: boolean) => void,
  ): void;
  /** Commits the queue now. */
  flush(): void;
  /**
   * Forgets expired devices older than the retention, then hands freed pages back to the file
   * system (incremental vacuum, WAL truncated).
   */
  purge(now: number): void;
  /** References committed to SQLite (one per absent device and frame). */
  readonly stored: number;
  /** References queued for the next commit. */
  readonly pending: number;
  /** Bytes counted against `buffer.maxBytes` (frames once, plus a fixed cost per reference). */
  readonly bytes: number;
  /** Size of relay.db and its WAL on disk. */
  fileBytes(): number;
  /**
   * Whether the database answers a query and the last write succeeded; after a failed write a
   * small write is tried. Failures are reported to `events.unhealthy`.
   */
  healthy(): boolean;
  /** Commits the queue and closes the database. */
  close(): void;
}
