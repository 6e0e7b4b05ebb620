import { statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Repeat, RepeatedTask } from '../../server/relay/relay.ts';
import { metricAt } from './metrics.ts';
import type { Frame, RelayClient } from './relay-client.ts';
import type { RelayHarness } from './relay-harness.ts';
import { eventually } from './wait.ts';

// What the relay buffer tests share: rooms with absent devices, rejoins, relay.db read by a
// second connection.

export const kib = 1024;
export const mib = 1024 * kib;

/** A rate limit no test sender reaches. */
export const fastSender = { ratePerSecond: 100_000, rateBurst: 100_000 };

export const pad = (bytes: number) => 'x'.repeat(bytes);

/** The sweep and heartbeat, run by the test instead of by timers. */
export function handDrivenTimers(): { repeat: Repeat; run(task: RepeatedTask): void } {
  const tasks = new Map<RepeatedTask, () => void>();
  return {
    repeat: (task, _periodMs, run) => {
      tasks.set(task, run);
      return () => tasks.delete(task);
    },
    run: (task) => tasks.get(task)?.(),
  };
}

export const sizeOf = (file: string) => statSync(file, { throwIfNoEntry: false })?.size ?? 0;

/** relay.db and its WAL, in bytes. */
export function fileBytes(dir: string): number {
  return sizeOf(join(dir, 'relay.db')) + sizeOf(join(dir, 'relay.db-wal'));
}

/** Runs `read` on relay.db opened read-only by a second connection. */
export function readRelayDb<T>(dir: string, read: (db: Database.Database) => T): T {
  const db = new Database(join(dir, 'relay.db'), { readonly: true, fileMustExist: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** Row counts of relay.db: frame rows and references. */
export function rows(dir: string): { frames: number; references: number } {
  return readRelayDb(dir, (db) => {
    const count = (table: string) =>
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return { frames: count('bufferedFrames'), references: count('bufferedMessages') };
  });
}

/**
 * Each frame row of relay.db with its `refs` and the references that really point at it, and
 * how many references point at no frame and how many `bufferedDevices` rows there are.
 */
export function referenceCounts(dir: string): {
  frames: Array<{ id: number; refs: number; references: number }>;
  dangling: number;
  devices: number;
} {
  return readRelayDb(dir, (db) => ({
    frames: db
      .prepare<[], { id: number; refs: number; references: number }>(
        `SELECT f.id, f.refs, (SELECT count(*) FROM bufferedMessages m WHERE m.frame = f.id) AS "references"
         FROM bufferedFrames f ORDER BY f.id`,
      )
      .all(),
    dangling: (
      db
        .prepare(
          'SELECT count(*) AS n FROM bufferedMessages m WHERE NOT EXISTS (SELECT 1 FROM bufferedFrames f WHERE f.id = m.frame)',
        )
        .get() as { n: number }
    ).n,
    devices: (db.prepare('SELECT count(*) AS n FROM bufferedDevices').get() as { n: number }).n,
  }));
}

export function metric(harness: RelayHarness, name: string): Promise<number> {
  return metricAt(harness.statusUrl, name);
}

/** A room of `userId` with a present host (`firstDevice`) and the next `absent` devices dropped. */
export async function roomWithAbsent(
  harness: RelayHarness,
  userId: number,
  absent: number,
  firstDevice = 1,
): Promise<{ room: string; host: RelayClient }> {
  const room = harness.room(userId);
  const host = (await harness.joined(room, userId, firstDevice)).client;
  for (let d = 1; d <= absent; d++) {
    const { client } = await harness.joined(room, userId, firstDevice + d);
    await host.next('presence');
    client.terminate();
    await host.take((f) => f.type === 'presence' && f.state === 'left');
  }
  return { room, host };
}

/** Everything sent has been routed and committed (nothing queued). */
export async function settled(harness: RelayHarness, host: RelayClient): Promise<void> {
  await host.sync();
  await eventually(async () => (await metric(harness, 'relay_buffer_pending_messages')) === 0);
}

/** Device `deviceId` joins `room` again and takes what was buffered for it. */
export async function rejoin(
  harness: RelayHarness,
  room: string,
  userId: number,
  deviceId: number,
) {
  const client = await harness.client();
  const joined = await client.join(room, deviceId, harness.token(userId, deviceId));
  const got: Frame[] = [];
  for (let i = 0; i < (joined.buffered as number); i++) got.push(await client.message());
  return { client, joined, payloads: got.map((f) => f.payload as { n: number }) };
}
