import { statSync } from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import { reclaimSpace } from '../sqlite-space.ts';
import { AbsentRegistry } from './buffer-absent.ts';
import { type BoundScope, FrameStore } from './buffer-frames.ts';
import { type Op, WriteQueue } from './buffer-queue.ts';
import { openBufferStore } from './buffer-store.ts';
import type { AbsentDevice, BufferEvents, BufferLimits, MessageBuffer } from './buffer-types.ts';

export type { AbsentDevice, BufferEvents, BufferLimits, MessageBuffer } from './buffer-types.ts';

interface DeviceRow {
  state: 'present' | 'absent' | 'expired';
  since: number;
  gap: number;
}

interface AbsentRow {
  room: string;
  device: string;
  since: number;
  gap: number;
}

type BufferDatabase = BetterSqlite3.Database;

/** The statements of the buffer's device records, prepared once. */
function prepareStatements(db: BufferDatabase) {
  return {
    upsertDevice: db.prepare<[string, string, string, number, number]>(
      `INSERT INTO roomDevices (room, device, state, since, gap) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (room, device) DO UPDATE SET state = excluded.state, since = excluded.since, gap = excluded.gap`,
    ),
    setGap: db.prepare<[string, string]>(
      'UPDATE roomDevices SET gap = 1 WHERE room = ? AND device = ?',
    ),
    selectDevice: db.prepare<[string, string], DeviceRow>(
      'SELECT state, since, gap FROM roomDevices WHERE room = ? AND device = ?',
    ),
    deleteDevice: db.prepare<[string, string]>(
      'DELETE FROM roomDevices WHERE room = ? AND device = ?',
    ),
    deleteDeviceEverywhere: db.prepare<[string]>('DELETE FROM roomDevices WHERE device = ?'),
    insertRevoked: db.prepare<[string, number]>(
      `INSERT INTO revokedDevices (device, revokedAt) VALUES (?, ?)
       ON CONFLICT (device) DO UPDATE SET revokedAt = excluded.revokedAt`,
    ),
    probe: db.prepare<[number]>(
      'INSERT INTO bufferProbe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at',
    ),
    ping: db.prepare('SELECT 1'),
  };
}

/** Opens (and creates, or migrates) the buffer database at `path`. */
export function openMessageBuffer(
  path: string,
  limits: BufferLimits,
  events: BufferEvents,
): MessageBuffer {
  return new SqliteMessageBuffer(path, limits, events);
}

/** The buffer on its SQLite file (see `MessageBuffer`). */
class SqliteMessageBuffer implements MessageBuffer {
  readonly #path: string;
  readonly #limits: BufferLimits;
  readonly #events: BufferEvents;
  readonly #db: BufferDatabase;
  readonly #sql: ReturnType<typeof prepareStatements>;
  readonly #frames: FrameStore;
  /** The absent devices known to this run, to count what they lose to a bound. */
  readonly absent = new AbsentRegistry();
  /** Rows were deleted since the last reclaim. */
  #freed = false;
  readonly #writes: WriteQueue;
  #closed = false;
  readonly #takeOverTx: (
    room: string,
    device: string,
    now: number,
    deliver: (frames: string[], gap: boolean) => void,
  ) => void;

  constructor(path: string, limits: BufferLimits, events: BufferEvents) {
    this.#path = path;
    this.#limits = limits;
    this.#events = events;
    const { db, notes } = openBufferStore(path);
    if (notes.migrated !== undefined || notes.vacuumFailed !== undefined) events.opened(notes);
    this.#db = db;
    this.#sql = prepareStatements(db);
    this.#frames = new FrameStore(
      db,
      { maxBytes: limits.maxBytes, userMaxBytes: limits.userMaxBytes },
      (scope, room, device, bytes) => this.#lostToBound(scope, room, device, bytes),
    );
    const commit = db.transaction((ops: Op[]) => this.#apply(ops));
    this.#writes = new WriteQueue(commit, this.#frames, events);
    this.#takeOverTx = db.transaction(
      (
        room: string,
        device: string,
        now: number,
        deliver: Parameters<MessageBuffer['takeOver']>[3],
      ) => this.#takeOverIn(room, device, now, deliver),
    );
  }

  /** A device lost its oldest frame to a bound, inside the transaction under way. */
  #lostToBound(scope: BoundScope, room: string, device: string, bytes: number): void {
    this.#writes.lostToBound(scope);
    this.#freed = true;
    this.#sql.setGap.run(room, device);
    const entry = this.absent.get(room, device);
    if (entry === undefined) return;
    entry.messages--;
    entry.bytes -= bytes;
    entry.gap = true;
  }

  /** Drops the oldest frames of a device until it is within both per-device caps. */
  #trim(entry: AbsentDevice): void {
    const limits = this.#limits;
    const excess = this.#frames.oldestBeyond(
      entry.room,
      entry.device,
      entry.messages - limits.maxMessages,
      entry.bytes - limits.deviceMaxBytes,
    );
    if (excess.upTo < 0) return;
    const dropped = this.#frames.release(entry.room, entry.device, excess.upTo);
    this.#freed = true;
    entry.messages -= dropped;
    entry.bytes -= excess.bytes;
    entry.gap = true;
    this.#sql.setGap.run(entry.room, entry.device);
    this.#events.droppedCap(dropped);
  }

  #dropExpired(room: string, device: string): void {
    const dropped = this.#frames.release(room, device);
    if (dropped > 0) {
      this.#freed = true;
      this.#events.droppedExpired(dropped);
    }
  }

  /** One batch of queued operations, inside its transaction. */
  #apply(ops: Op[]): void {
    const { upsertDevice, deleteDevice, deleteDeviceEverywhere, insertRevoked } = this.#sql;
    const frames = this.#frames;
    const limits = this.#limits;
    const overCap = new Set<AbsentDevice>();
    for (const op of ops) {
      switch (op.kind) {
        case 'message':
          frames.insert(op.frame, op.bytes, op.entries);
          for (const entry of op.entries) {
            if (entry.messages > limits.maxMessages || entry.bytes > limits.deviceMaxBytes) {
              overCap.add(entry);
            }
          }
          break;
        case 'absent':
          upsertDevice.run(
            op.entry.room,
            op.entry.device,
            'absent',
            op.entry.droppedAt,
            op.entry.gap ? 1 : 0,
          );
          break;
        case 'expire':
          this.#dropExpired(op.room, op.device);
          upsertDevice.run(op.room, op.device, 'expired', op.at, 1);
          break;
        case 'forget':
          this.#freed = frames.release(op.room, op.device) > 0 || this.#freed;
          deleteDevice.run(op.room, op.device);
          break;
        case 'forgetDevice':
          this.#freed = frames.releaseEverywhere(op.device) > 0 || this.#freed;
          deleteDeviceEverywhere.run(op.device);
          break;
        case 'revoke':
          insertRevoked.run(op.device, op.revokedAt);
          break;
      }
    }
    for (const entry of overCap) this.#trim(entry);
  }

  flush(): void {
    this.#writes.flush();
  }

  /** `takeOver`'s transaction: reads, hands over and deletes what was kept for the device. */
  #takeOverIn(
    room: string,
    device: string,
    now: number,
    deliver: (frames: string[], gap: boolean) => void,
  ): void {
    const row = this.#sql.selectDevice.get(room, device);
    const remembered = this.absent.get(room, device)?.gap === true;
    let texts: string[] = [];
    let gap = remembered;
    if (row !== undefined && row.state === 'absent' && now < row.since + this.#limits.windowMs) {
      texts = this.#frames.textsOf(room, device);
      gap ||= row.gap === 1;
    } else if (row !== undefined && row.state !== 'present') {
      // The window passed (maybe while the relay was down): whatever was kept is dropped.
      gap = true;
      this.#dropExpired(room, device);
    }
    deliver(texts, gap);
    // Also when a bound took everything it had: its bufferedDevices row goes too.
    if (this.#frames.release(room, device) > 0) this.#freed = true;
    this.#sql.upsertDevice.run(room, device, 'present', now, 0);
    this.absent.delete(room, device);
  }

  restore(now: number): AbsentDevice[] {
    const db = this.#db;
    return db.transaction(() => {
      db.prepare("UPDATE roomDevices SET state = 'absent', since = ? WHERE state = 'present'").run(
        now,
      );
      const expired = db
        .prepare<[number], { room: string; device: string }>(
          "SELECT room, device FROM roomDevices WHERE state = 'absent' AND since <= ?",
        )
        .all(now - this.#limits.windowMs);
      for (const row of expired) {
        this.#dropExpired(row.room, row.device);
        this.#sql.upsertDevice.run(row.room, row.device, 'expired', now, 1);
      }
      const rows = db
        .prepare<[], AbsentRow>(
          "SELECT room, device, since, gap FROM roomDevices WHERE state = 'absent'",
        )
        .all();
      return rows.map((row): AbsentDevice => {
        const kept = this.#frames.referencesOf(row.room, row.device);
        const entry: AbsentDevice = {
          room: row.room,
          device: row.device,
          droppedAt: row.since,
          messages: kept.length,
          bytes: kept.reduce((sum, ref) => sum + ref.bytes, 0),
          gap: row.gap === 1,
        };
        this.absent.set(entry);
        return entry;
      });
    })();
  }

  revoked(): Map<string, number> {
    const rows = this.#db
      .prepare<[], { device: string; revokedAt: number }>(
        'SELECT device, revokedAt FROM revokedDevices',
      )
      .all();
    return new Map(rows.map((row) => [row.device, row.revokedAt]));
  }

  markAbsent(room: string, device: string, droppedAt: number): AbsentDevice {
    const entry: AbsentDevice = { room, device, droppedAt, messages: 0, bytes: 0, gap: false };
    this.absent.set(entry);
    this.#writes.push({ kind: 'absent', entry });
    return entry;
  }

  append(targets: AbsentDevice[], frame: string, bytes: number): void {
    if (targets.length === 0) return;
    for (const entry of targets) {
      entry.messages++;
      entry.bytes += bytes;
    }
    this.#writes.push({ kind: 'message', entries: targets, frame, bytes });
  }

  expire(entry: AbsentDevice, now: number): void {
    this.absent.delete(entry.room, entry.device);
    this.#writes.push({ kind: 'expire', room: entry.room, device: entry.device, at: now });
  }

  forget(room: string, device: string): void {
    this.absent.delete(room, device);
    this.#writes.push({ kind: 'forget', room, device });
  }

  present(room: string, device: string): void {
    this.absent.delete(room, device);
  }

  revoke(device: string, revokedAt: number): void {
    this.absent.deleteEverywhere(device);
    this.#writes.push({ kind: 'forgetDevice', device });
    this.#writes.push({ kind: 'revoke', device, revokedAt });
  }

  takeOver(
    room: string,
    device: string,
    now: number,
    deliver: (frames: string[], gap: boolean) => void,
  ): void {
    this.flush();
    try {
      this.#takeOverTx(room, device, now, deliver);
    } catch (err: unknown) {
      // Rolled back: what this run counted while releasing the frames is read again.
      this.#frames.load();
      throw err;
    }
  }

  purge(now: number): void {
    if (this.#closed) return;
    this.flush();
    this.#db
      .prepare("DELETE FROM roomDevices WHERE state = 'expired' AND since < ?")
      .run(now - this.#limits.expiredRetentionMs);
    if (!this.#freed) return;
    reclaimSpace(this.#db);
    this.#freed = false;
  }

  get stored(): number {
    return this.#frames.stored;
  }

  get pending(): number {
    return this.#writes.pending;
  }

  get bytes(): number {
    return this.#frames.bytes;
  }

  fileBytes(): number {
    let size = 0;
    for (const file of [this.#path, `${this.#path}-wal`])
      size += statSync(file, { throwIfNoEntry: false })?.size ?? 0;
    return size;
  }

  healthy(): boolean {
    if (this.#closed) return false;
    try {
      this.#sql.ping.get();
      if (this.#writes.failed) {
        this.#sql.probe.run(Date.now());
        this.#writes.recovered();
      }
      return true;
    } catch (err: unknown) {
      this.#events.unhealthy(err);
      return false;
    }
  }

  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#writes.close();
    this.#db.close();
  }
}
