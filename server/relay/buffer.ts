import { statSync } from 'node:fs';
import { AbsentRegistry } from './buffer-absent.ts';
import { createFrameStore } from './buffer-frames.ts';
import { openBufferStore, reclaimSpace } from './buffer-store.ts';
import type { AbsentDevice, BufferEvents, BufferLimits, MessageBuffer } from './buffer-types.ts';

export type { AbsentDevice, BufferEvents, BufferLimits, MessageBuffer } from './buffer-types.ts';

type Op =
  | { kind: 'message'; entries: AbsentDevice[]; frame: string; bytes: number }
  | { kind: 'absent'; entry: AbsentDevice }
  | { kind: 'expire'; room: string; device: string; at: number }
  | { kind: 'forget'; room: string; device: string }
  | { kind: 'forgetDevice'; device: string }
  | { kind: 'revoke'; device: string; revokedAt: number };

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

/** Opens (and creates, or migrates) the buffer database at `path`. */
export function openMessageBuffer(
  path: string,
  limits: BufferLimits,
  events: BufferEvents,
): MessageBuffer {
  const { db, notes } = openBufferStore(path);
  if (notes.migrated !== undefined || notes.vacuumFailed !== undefined) events.opened(notes);
  /** The absent devices known to this run, to count what they lose to a bound. */
  const entries = new AbsentRegistry();
  /** Frames lost to a bound in the transaction under way, reported once it commits. */
  const lostInTransaction = { user: 0, buffer: 0 };
  /** Rows were deleted since the last reclaim. */
  let freed = false;

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
  const insertRevoked = db.prepare<[string, number]>(
    `INSERT INTO revokedDevices (device, revokedAt) VALUES (?, ?)
     ON CONFLICT (device) DO UPDATE SET revokedAt = excluded.revokedAt`,
  );
  const probe = db.prepare<[number]>(
    'INSERT INTO bufferProbe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at',
  );
  const ping = db.prepare('SELECT 1');

  const frames = createFrameStore(
    db,
    { maxBytes: limits.maxBytes, userMaxBytes: limits.userMaxBytes },
    (scope, room, device, bytes) => {
      lostInTransaction[scope]++;
      freed = true;
      setGap.run(room, device);
      const entry = entries.get(room, device);
      if (entry === undefined) return;
      entry.messages--;
      entry.bytes -= bytes;
      entry.gap = true;
    },
  );

  let queue: Op[] = [];
  let pendingFrames = 0;
  let flushScheduled = false;
  let closed = false;
  /** The last write failed; cleared by the next one that succeeds. */
  let writeFailed = false;

  /** Drops the oldest frames of a device until it is within both per-device caps. */
  function trim(entry: AbsentDevice): void {
    const excess = frames.oldestBeyond(
      entry.room,
      entry.device,
      entry.messages - limits.maxMessages,
      entry.bytes - limits.deviceMaxBytes,
    );
    if (excess.upTo < 0) return;
    const dropped = frames.release(entry.room, entry.device, excess.upTo);
    freed = true;
    entry.messages -= dropped;
    entry.bytes -= excess.bytes;
    entry.gap = true;
    setGap.run(entry.room, entry.device);
    events.droppedCap(dropped);
  }

  function dropExpired(room: string, device: string): void {
    const dropped = frames.release(room, device);
    if (dropped > 0) {
      freed = true;
      events.droppedExpired(dropped);
    }
  }

  const commit = db.transaction((ops: Op[]) => {
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
          dropExpired(op.room, op.device);
          upsertDevice.run(op.room, op.device, 'expired', op.at, 1);
          break;
        case 'forget':
          freed = frames.release(op.room, op.device) > 0 || freed;
          deleteDevice.run(op.room, op.device);
          break;
        case 'forgetDevice':
          freed = frames.releaseEverywhere(op.device) > 0 || freed;
          deleteDeviceEverywhere.run(op.device);
          break;
        case 'revoke':
          insertRevoked.run(op.device, op.revokedAt);
          break;
      }
    }
    for (const entry of overCap) trim(entry);
  });

  /** Runs a write transaction; a failure marks the buffer unhealthy until a write succeeds. */
  function write(ops: Op[]): unknown {
    lostInTransaction.user = 0;
    lostInTransaction.buffer = 0;
    try {
      commit(ops);
    } catch (err: unknown) {
      if ((err as { committedInMemory?: boolean }).committedInMemory === true) {
        // sql.js: applied in memory, written to the file with the next write that succeeds.
        reportBound();
        markFailed(err, 0);
        return undefined;
      }
      return err;
    }
    reportBound();
    events.flushed();
    if (writeFailed) {
      writeFailed = false;
      events.recovered();
    }
    return undefined;
  }

  function reportBound(): void {
    if (lostInTransaction.user > 0) events.droppedBound('user', lostInTransaction.user);
    if (lostInTransaction.buffer > 0) events.droppedBound('buffer', lostInTransaction.buffer);
  }

  function markFailed(err: unknown, lost: number): void {
    writeFailed = true;
    events.failed(err, lost);
  }

  /**
   * A rolled-back batch: its frames are lost (counted, `gap` for their devices); what else it
   * held (absent marks, expiries, revocations) is tried again at once.
   */
  function recoverFrom(err: unknown, ops: Op[]): void {
    let lost = 0;
    const touched = new Set<AbsentDevice>();
    for (const op of ops) {
      if (op.kind !== 'message') continue;
      for (const entry of op.entries) {
        lost++;
        entry.gap = true;
        touched.add(entry);
      }
    }
    frames.load();
    for (const entry of touched) {
      const kept = frames.referencesOf(entry.room, entry.device);
      entry.messages = kept.length;
      entry.bytes = kept.reduce((sum, row) => sum + row.bytes, 0);
    }
    markFailed(err, lost);
    const rest: Op[] = ops.filter((op) => op.kind !== 'message');
    for (const entry of touched) rest.push({ kind: 'absent', entry });
    if (rest.length > 0 && write(rest) !== undefined) frames.load();
  }

  function flush(): void {
    flushScheduled = false;
    if (queue.length === 0 || closed) return;
    const ops = queue;
    queue = [];
    pendingFrames = 0;
    // The relay keeps routing live traffic; a failed batch is counted and reported.
    const err = write(ops);
    if (err !== undefined) recoverFrom(err, ops);
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
      const remembered = entries.get(room, device)?.gap === true;
      let texts: string[] = [];
      let gap = remembered;
      if (row !== undefined && row.state === 'absent' && now < row.since + limits.windowMs) {
        texts = frames.textsOf(room, device);
        gap ||= row.gap === 1;
      } else if (row !== undefined && row.state !== 'present') {
        // The window passed (maybe while the relay was down): whatever was kept is dropped.
        gap = true;
        dropExpired(room, device);
      }
      deliver(texts, gap);
      // Also when a bound took everything it had: its bufferedDevices row goes too.
      if (frames.release(room, device) > 0) freed = true;
      upsertDevice.run(room, device, 'present', now, 0);
      entries.delete(room, device);
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
          dropExpired(row.room, row.device);
          upsertDevice.run(row.room, row.device, 'expired', now, 1);
        }
        const rows = db
          .prepare<[], AbsentRow>(
            "SELECT room, device, since, gap FROM roomDevices WHERE state = 'absent'",
          )
          .all();
        return rows.map((row): AbsentDevice => {
          const kept = frames.referencesOf(row.room, row.device);
          const entry: AbsentDevice = {
            room: row.room,
            device: row.device,
            droppedAt: row.since,
            messages: kept.length,
            bytes: kept.reduce((sum, ref) => sum + ref.bytes, 0),
            gap: row.gap === 1,
          };
          entries.set(entry);
          return entry;
        });
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
    absent: entries,
    markAbsent(room, device, droppedAt) {
      const entry: AbsentDevice = { room, device, droppedAt, messages: 0, bytes: 0, gap: false };
      entries.set(entry);
      enqueue({ kind: 'absent', entry });
      return entry;
    },
    append(targets, frame, bytes) {
      if (targets.length === 0) return;
      for (const entry of targets) {
        entry.messages++;
        entry.bytes += bytes;
      }
      pendingFrames += targets.length;
      enqueue({ kind: 'message', entries: targets, frame, bytes });
    },
    expire(entry, now) {
      entries.delete(entry.room, entry.device);
      enqueue({ kind: 'expire', room: entry.room, device: entry.device, at: now });
    },
    forget(room, device) {
      entries.delete(room, device);
      enqueue({ kind: 'forget', room, device });
    },
    present(room, device) {
      entries.delete(room, device);
    },
    revoke(device, revokedAt) {
      entries.deleteEverywhere(device);
      enqueue({ kind: 'forgetDevice', device });
      enqueue({ kind: 'revoke', device, revokedAt });
    },
    takeOver(room, device, now, deliver) {
      flush();
      try {
        takeOverTx(room, device, now, deliver);
      } catch (err: unknown) {
        // Rolled back: what this run counted while releasing the frames is read again.
        frames.load();
        throw err;
      }
    },
    flush,
    purge(now) {
      if (closed) return;
      flush();
      db.prepare("DELETE FROM roomDevices WHERE state = 'expired' AND since < ?").run(
        now - limits.expiredRetentionMs,
      );
      if (!freed) return;
      reclaimSpace(db);
      freed = false;
    },
    get stored() {
      return frames.stored;
    },
    get pending() {
      return pendingFrames;
    },
    get bytes() {
      return frames.bytes;
    },
    fileBytes() {
      let size = 0;
      for (const file of [path, `${path}-wal`])
        size += statSync(file, { throwIfNoEntry: false })?.size ?? 0;
      return size;
    },
    healthy() {
      if (closed) return false;
      try {
        ping.get();
        if (writeFailed) {
          probe.run(Date.now());
          writeFailed = false;
          events.recovered();
        }
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
