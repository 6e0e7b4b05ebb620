import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { openSyncSqlite } from '../db/sqlite-engine.ts';

/**
 * A device that disconnected without `leave`: while `droppedAt + window` is ahead, every frame
 * addressed to it is stored. The broker keeps this object; the buffer updates its counters.
 */
export interface AbsentDevice {
  readonly room: string;
  readonly device: string;
  /** Clock time (ms) of the drop. */
  readonly droppedAt: number;
  /** Frames stored (committed or queued). */
  messages: number;
  bytes: number;
  /** Some frames were dropped by the per-device cap. */
  gap: boolean;
}

export interface BufferLimits {
  /** `buffer.seconds` in ms. */
  windowMs: number;
  /** `buffer.maxMessages`: per device, oldest dropped beyond it. */
  maxMessages: number;
  /** `buffer.maxBytes`: per device, oldest dropped beyond it. */
  maxBytes: number;
  /** How long the relay remembers that a device's window expired (so its next join says gap). */
  expiredRetentionMs: number;
}

type Op =
  | { kind: 'message'; entry: AbsentDevice; frame: string; bytes: number }
  | { kind: 'absent'; entry: AbsentDevice }
  | { kind: 'expire'; room: string; device: string; at: number }
  | { kind: 'forget'; room: string; device: string }
  | { kind: 'forgetDevice'; device: string }
  | { kind: 'revoke'; device: string; revokedAt: number };

export interface BufferEvents {
  /** Frames dropped because a device's window expired. */
  droppedExpired(count: number): void;
  /** Frames dropped because a device reached its cap. */
  droppedCap(count: number): void;
  /** A write transaction committed. */
  flushed(): void;
  /** A write transaction failed; its frames are lost. */
  failed(err: unknown, lostFrames: number): void;
  /** The health check could not read the database. */
  unhealthy(err: unknown): void;
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
  /** Records that a device dropped without leave. */
  markAbsent(entry: AbsentDevice): void;
  /** Stores a frame for an absent device (committed on the next flush). */
  append(entry: AbsentDevice, frame: string, bytes: number): void;
  /** The window of an absent device passed: its frames are dropped, its next join gets `gap`. */
  expire(entry: AbsentDevice, now: number): void;
  /** A device left cleanly: nothing is kept for it in that room. */
  forget(room: string, device: string): void;
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
  /** Forgets expired devices older than the retention. */
  purge(now: number): void;
  /** Frames committed to SQLite. */
  readonly stored: number;
  /** Frames queued for the next commit. */
  readonly pending: number;
  /** Whether the database answers a query; a failure is reported to `events.unhealthy`. */
  healthy(): boolean;
  /** Commits the queue and closes the database. */
  close(): void;
}

const schema = `
CREATE TABLE IF NOT EXISTS roomDevices (
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('present', 'absent', 'expired')),
  since INTEGER NOT NULL,
  gap INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (room, device)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bufferedMessages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  room TEXT NOT NULL,
  device TEXT NOT NULL,
  frame TEXT NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS bufferedMessagesByDevice ON bufferedMessages (room, device, id);
CREATE TABLE IF NOT EXISTS revokedDevices (
  device TEXT PRIMARY KEY,
  revokedAt INTEGER NOT NULL
) WITHOUT ROWID;
`;

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
  messages: number;
  bytes: number;
}

/** Opens (and creates) the buffer database at `path`. */
export function openMessageBuffer(
  path: string,
  limits: BufferLimits,
  events: BufferEvents,
): MessageBuffer {
  mkdirSync(dirname(path), { recursive: true });
  // better-sqlite3, or sql.js when its addon cannot load here (chosen at start).
  const db = openSyncSqlite(path);
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: a commit survives a process crash (kill -9); only a power loss can lose the
  // last commits. No fsync per transaction.
  db.pragma('synchronous = NORMAL');
  db.exec(schema);

  const upsertDevice = db.prepare<[string, string, string, number, number]>(
    `INSERT INTO roomDevices (room, device, state, since, gap) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (room, device) DO UPDATE SET state = excluded.state, since = excluded.since, gap = excluded.gap`,
  );
  const setGap = db.prepare<[string, string]>(
    'UPDATE roomDevices SET gap = 1 WHERE room = ? AND device = ?',
  );
  const selectDevice = db.prepare<[string, string], DeviceRow>(
    'SELECT state, since, gap FROM roomDevices WHERE room = ? AND device = ?',
  );
  const deleteDevice = db.prepare<[string, string]>(
    'DELETE FROM roomDevices WHERE room = ? AND device = ?',
  );
  const deleteDeviceEverywhere = db.prepare<[string]>('DELETE FROM roomDevices WHERE device = ?');
  const insertMessage = db.prepare<[string, string, string, number]>(
    'INSERT INTO bufferedMessages (room, device, frame, bytes) VALUES (?, ?, ?, ?)',
  );
  const selectFrames = db
    .prepare<[string, string], string>(
      'SELECT frame FROM bufferedMessages WHERE room = ? AND device = ? ORDER BY id',
    )
    .pluck();
  const selectSizes = db.prepare<[string, string], { id: number; bytes: number }>(
    'SELECT id, bytes FROM bufferedMessages WHERE room = ? AND device = ? ORDER BY id',
  );
  const deleteMessages = db.prepare<[string, string]>(
    'DELETE FROM bufferedMessages WHERE room = ? AND device = ?',
  );
  const deleteMessagesUpTo = db.prepare<[string, string, number]>(
    'DELETE FROM bufferedMessages WHERE room = ? AND device = ? AND id <= ?',
  );
  const deleteMessagesEverywhere = db.prepare<[string]>(
    'DELETE FROM bufferedMessages WHERE device = ?',
  );
  const insertRevoked = db.prepare<[string, number]>(
    `INSERT INTO revokedDevices (device, revokedAt) VALUES (?, ?)
     ON CONFLICT (device) DO UPDATE SET revokedAt = excluded.revokedAt`,
  );
  const ping = db.prepare('SELECT 1');

  let stored = (db.prepare('SELECT count(*) AS n FROM bufferedMessages').get() as { n: number }).n;
  let queue: Op[] = [];
  let pendingFrames = 0;
  let flushScheduled = false;
  let closed = false;

  /** Drops the oldest frames of a device until it is within both caps. */
  function trim(entry: AbsentDevice): void {
    let excessMessages = entry.messages - limits.maxMessages;
    let excessBytes = entry.bytes - limits.maxBytes;
    if (excessMessages <= 0 && excessBytes <= 0) return;
    let lastId = -1;
    let dropped = 0;
    let droppedBytes = 0;
    for (const row of selectSizes.iterate(entry.room, entry.device)) {
      if (excessMessages <= 0 && excessBytes <= 0) break;
      lastId = row.id;
      dropped++;
      droppedBytes += row.bytes;
      excessMessages--;
      excessBytes -= row.bytes;
    }
    if (dropped === 0) return;
    deleteMessagesUpTo.run(entry.room, entry.device, lastId);
    stored -= dropped;
    entry.messages -= dropped;
    entry.bytes -= droppedBytes;
    entry.gap = true;
    setGap.run(entry.room, entry.device);
    events.droppedCap(dropped);
  }

  const commit = db.transaction((ops: Op[]) => {
    const overCap = new Set<AbsentDevice>();
    for (const op of ops) {
      switch (op.kind) {
        case 'message':
          insertMessage.run(op.entry.room, op.entry.device, op.frame, op.bytes);
          stored++;
          if (op.entry.messages > limits.maxMessages || op.entry.bytes > limits.maxBytes) {
            overCap.add(op.entry);
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
        case 'expire': {
          const dropped = deleteMessages.run(op.room, op.device).changes;
          stored -= dropped;
          if (dropped > 0) events.droppedExpired(dropped);
          upsertDevice.run(op.room, op.device, 'expired', op.at, 1);
          break;
        }
        case 'forget':
          stored -= deleteMessages.run(op.room, op.device).changes;
          deleteDevice.run(op.room, op.device);
          break;
        case 'forgetDevice':
          stored -= deleteMessagesEverywhere.run(op.device).changes;
          deleteDeviceEverywhere.run(op.device);
          break;
        case 'revoke':
          insertRevoked.run(op.device, op.revokedAt);
          break;
      }
    }
    for (const entry of overCap) trim(entry);
  });

  function flush(): void {
    flushScheduled = false;
    if (queue.length === 0 || closed) return;
    const ops = queue;
    const frames = pendingFrames;
    queue = [];
    pendingFrames = 0;
    try {
      commit(ops);
      events.flushed();
    } catch (err: unknown) {
      // The relay keeps routing live traffic; only these buffered frames are lost.
      events.failed(err, frames);
    }
  }

  function enqueue(op: Op): void {
    if (closed) return;
    queue.push(op);
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  }

  const takeOverTx = db.transaction(
    (
      room: string,
      device: string,
      now: number,
      deliver: (frames: string[], gap: boolean) => void,
    ): void => {
      const row = selectDevice.get(room, device);
      let frames: string[] = [];
      let gap = false;
      if (row !== undefined && row.state === 'absent' && now < row.since + limits.windowMs) {
        frames = selectFrames.all(room, device);
        gap = row.gap === 1;
      } else if (row !== undefined && row.state !== 'present') {
        // The window passed (maybe while the relay was down): whatever was kept is dropped.
        gap = true;
        const dropped = deleteMessages.run(room, device).changes;
        stored -= dropped;
        if (dropped > 0) events.droppedExpired(dropped);
      }
      deliver(frames, gap);
      if (frames.length > 0) stored -= deleteMessages.run(room, device).changes;
      upsertDevice.run(room, device, 'present', now, 0);
    },
  );

  return {
    restore(now) {
      return db.transaction(() => {
        db.prepare(
          "UPDATE roomDevices SET state = 'absent', since = ? WHERE state = 'present'",
        ).run(now);
        const expired = db
          .prepare<[number], { room: string; device: string }>(
            "SELECT room, device FROM roomDevices WHERE state = 'absent' AND since <= ?",
          )
          .all(now - limits.windowMs);
        for (const row of expired) {
          const dropped = deleteMessages.run(row.room, row.device).changes;
          stored -= dropped;
          if (dropped > 0) events.droppedExpired(dropped);
          upsertDevice.run(row.room, row.device, 'expired', now, 1);
        }
        const rows = db
          .prepare<[], AbsentRow>(
            `SELECT d.room, d.device, d.since, d.gap,
                    count(m.id) AS messages, coalesce(sum(m.bytes), 0) AS bytes
             FROM roomDevices d LEFT JOIN bufferedMessages m ON m.room = d.room AND m.device = d.device
             WHERE d.state = 'absent' GROUP BY d.room, d.device`,
          )
          .all();
        return rows.map(
          (row): AbsentDevice => ({
            room: row.room,
            device: row.device,
            droppedAt: row.since,
            messages: row.messages,
            bytes: row.bytes,
            gap: row.gap === 1,
          }),
        );
      })();
    },
    revoked() {
      const rows = db
        .prepare<[], { device: string; revokedAt: number }>(
          'SELECT device, revokedAt FROM revokedDevices',
        )
        .all();
      return new Map(rows.map((row) => [row.device, row.revokedAt]));
    },
    markAbsent(entry) {
      enqueue({ kind: 'absent', entry });
    },
    append(entry, frame, bytes) {
      entry.messages++;
      entry.bytes += bytes;
      pendingFrames++;
      enqueue({ kind: 'message', entry, frame, bytes });
    },
    expire(entry, now) {
      enqueue({ kind: 'expire', room: entry.room, device: entry.device, at: now });
    },
    forget(room, device) {
      enqueue({ kind: 'forget', room, device });
    },
    revoke(device, revokedAt) {
      enqueue({ kind: 'forgetDevice', device });
      enqueue({ kind: 'revoke', device, revokedAt });
    },
    takeOver(room, device, now, deliver) {
      flush();
      takeOverTx(room, device, now, deliver);
    },
    flush,
    purge(now) {
      if (closed) return;
      flush();
      db.prepare("DELETE FROM roomDevices WHERE state = 'expired' AND since < ?").run(
        now - limits.expiredRetentionMs,
      );
    },
    get stored() {
      return stored;
    },
    get pending() {
      return pendingFrames;
    },
    healthy() {
      if (closed) return false;
      try {
        ping.get();
        return true;
      } catch (err: unknown) {
        events.unhealthy(err);
        return false;
      }
    },
    close() {
      if (closed) return;
      flush();
      closed = true;
      db.close();
    },
  };
}
