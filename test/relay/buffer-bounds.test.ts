import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import type { Repeat, RepeatedTask } from '../../server/relay/relay.ts';
import { createRoomId } from '../../server/tokens.ts';
import { testSecret } from '../helpers/configs.ts';
import type { Frame, RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

const kib = 1024;
const mib = 1024 * kib;

/** The sweep and heartbeat, run by the test instead of by timers. */
function handDrivenTimers(): { repeat: Repeat; run(task: RepeatedTask): void } {
  const tasks = new Map<RepeatedTask, () => void>();
  return {
    repeat: (task, _periodMs, run) => {
      tasks.set(task, run);
      return () => tasks.delete(task);
    },
    run: (task) => tasks.get(task)?.(),
  };
}

const sizeOf = (file: string) => statSync(file, { throwIfNoEntry: false })?.size ?? 0;

/** relay.db and its WAL, in bytes. */
function fileBytes(dir: string): number {
  return sizeOf(join(dir, 'relay.db')) + sizeOf(join(dir, 'relay.db-wal'));
}

/** What the WAL may hold besides the database: 1,000 pages before a checkpoint, plus a commit. */
const walAllowance = 5 * mib;

/** Row counts of relay.db read by a second connection. */
function rows(dir: string): { frames: number; references: number } {
  const db = new Database(join(dir, 'relay.db'), { readonly: true, fileMustExist: true });
  try {
    const count = (table: string) =>
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return { frames: count('bufferedFrames'), references: count('bufferedMessages') };
  } finally {
    db.close();
  }
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${harness.statusUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

/** A room of `userId` with a present host (device 1) and devices 2..absent+1 dropped. */
async function roomWithAbsent(userId: number, absent: number, firstDevice = 1) {
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
async function settled(host: RelayClient): Promise<void> {
  await host.sync();
  await eventually(async () => (await metric('relay_buffer_pending_messages')) === 0);
}

async function rejoin(room: string, userId: number, deviceId: number) {
  const client = await harness.client();
  const joined = await client.join(room, deviceId, harness.token(userId, deviceId));
  const got: Frame[] = [];
  for (let i = 0; i < (joined.buffered as number); i++) got.push(await client.message());
  return { client, joined, payloads: got.map((f) => f.payload as { n: number }) };
}

const pad = (bytes: number) => 'x'.repeat(bytes);

/**
 * A relay.db in the layout before the bounds (each frame copied in every device's row): device 2
 * of `room` dropped at `droppedAt` with two frames kept, one of them a broadcast also kept for 3.
 */
function versionOneFile(dir: string, room: string, droppedAt: number): void {
  const db = new Database(join(dir, 'relay.db'));
  db.exec(`
    CREATE TABLE roomDevices (room TEXT NOT NULL, device TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('present', 'absent', 'expired')),
      since INTEGER NOT NULL, gap INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (room, device)) WITHOUT ROWID;
    CREATE TABLE bufferedMessages (id INTEGER PRIMARY KEY AUTOINCREMENT, room TEXT NOT NULL,
      device TEXT NOT NULL, frame TEXT NOT NULL, bytes INTEGER NOT NULL);
    CREATE INDEX bufferedMessagesByDevice ON bufferedMessages (room, device, id);
    CREATE TABLE revokedDevices (device TEXT PRIMARY KEY, revokedAt INTEGER NOT NULL) WITHOUT ROWID;
  `);
  const device = db.prepare('INSERT INTO roomDevices VALUES (?, ?, ?, ?, 0)');
  device.run(room, '2', 'absent', droppedAt);
  device.run(room, '3', 'absent', droppedAt);
  const message = db.prepare(
    'INSERT INTO bufferedMessages (room, device, frame, bytes) VALUES (?, ?, ?, ?)',
  );
  const frame = (to: string | number, n: number) =>
    JSON.stringify({ from: 1, to, room, payload: { n } });
  for (const [target, to, n] of [
    ['2', 2, 1],
    ['2', 'broadcast', 2],
    ['3', 'broadcast', 2],
  ] as const) {
    message.run(room, target, frame(to, n), frame(to, n).length);
  }
  db.close();
}
const fastSender = { ratePerSecond: 100_000, rateBurst: 100_000 };

describe.each(['native', 'wasm'] as const)(
  'relay buffer bounds (contract 6, rule 11) on the %s SQLite engine',
  (engine) => {
    beforeAll(async () => {
      await chooseSqliteEngine(engine, createLogger('silent'));
    });

    it('stores a broadcast to many absent devices once: one frame row, one reference per device', async () => {
      harness = await startRelayHarness();
      const { room, host } = await roomWithAbsent(1, 20);
      const before = fileBytes(harness.dir);
      host.send({ to: 'broadcast', payload: { n: 1, pad: pad(100 * kib) } });
      await settled(host);
      // 20 copies would be 2 MB; one copy and 20 small rows stay far below that
      expect(fileBytes(harness.dir) - before).toBeLessThan(400 * kib);
      expect(rows(harness.dir)).toEqual({ frames: 1, references: 20 });
      for (const device of [2, 21]) {
        const back = await rejoin(room, 1, device);
        expect(back.joined).toMatchObject({ buffered: 1, gap: false });
        expect(back.payloads[0]?.n).toBe(1);
      }
      await eventually(() => rows(harness.dir).references === 18);
      expect(rows(harness.dir).frames).toBe(1);
    });

    it('holds buffer.maxBytes over the whole buffer: the oldest are dropped, their devices get gap, the file stays bounded', async () => {
      harness = await startRelayHarness({
        config: { ...fastSender, bufferMaxBytes: 512 * kib, bufferUserMaxBytes: 64 * mib },
      });
      const first = await roomWithAbsent(1, 10);
      const second = await roomWithAbsent(2, 10, 100);
      // 2 users × 40 broadcasts × ~16 KiB for 10 devices: 1.3 MiB once, 13 MiB per device
      for (let n = 1; n <= 40; n++) {
        first.host.send({ to: 'broadcast', payload: { n, pad: pad(16 * kib) } });
        second.host.send({ to: 'broadcast', payload: { n, pad: pad(16 * kib) } });
      }
      await settled(first.host);
      await settled(second.host);
      expect(sizeOf(join(harness.dir, 'relay.db'))).toBeLessThan(2 * 512 * kib + 256 * kib);
      expect(fileBytes(harness.dir)).toBeLessThan(2 * 512 * kib + 256 * kib + walAllowance);
      expect(await metric('relay_buffer_bytes')).toBeLessThanOrEqual(512 * kib);
      const dropped = await metric('relay_messages_dropped_total{reason="buffer_bound"}');
      expect(dropped).toBeGreaterThan(0);
      const back = await rejoin(second.room, 2, 101);
      expect(back.joined.gap).toBe(true);
      const kept = back.payloads.map((p) => p.n);
      expect(kept.length).toBeGreaterThan(0);
      expect(kept.at(-1)).toBe(40);
      expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 41 - kept.length + i));
    });

    it("holds buffer.userMaxBytes per user: one user's flood drops only that user's oldest messages", async () => {
      harness = await startRelayHarness({
        config: { ...fastSender, bufferUserMaxBytes: 256 * kib, bufferMaxBytes: 64 * mib },
      });
      const quiet = await roomWithAbsent(2, 1, 100);
      quiet.host.send({ to: 'broadcast', payload: { n: 1, pad: pad(8 * kib) } });
      await settled(quiet.host);
      const flood = await roomWithAbsent(1, 5);
      for (let n = 1; n <= 60; n++) {
        flood.host.send({ to: 'broadcast', payload: { n, pad: pad(16 * kib) } });
      }
      await settled(flood.host);
      const flooded = await rejoin(flood.room, 1, 3);
      expect(flooded.joined.gap).toBe(true);
      const bytes = flooded.payloads.length * 16 * kib;
      expect(bytes).toBeLessThanOrEqual(256 * kib);
      expect(flooded.payloads.at(-1)?.n).toBe(60);
      const untouched = await rejoin(quiet.room, 2, 101);
      expect(untouched.joined).toMatchObject({ buffered: 1, gap: false });
      expect(await metric('relay_messages_dropped_total{reason="user_bound"}')).toBeGreaterThan(0);
      expect(await metric('relay_messages_dropped_total{reason="buffer_bound"}')).toBe(0);
    });

    it('migrates a relay.db of the layout before the bounds: what it kept is delivered after the start', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'relay-v1-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const room = createRoomId(1, testSecret);
      versionOneFile(dir, room, Date.now());
      harness = await startRelayHarness({ dir });
      expect(rows(dir)).toEqual({ frames: 3, references: 3 });
      const two = await rejoin(room, 1, 2);
      expect(two.joined).toMatchObject({ buffered: 2, gap: false });
      expect(two.payloads).toEqual([{ n: 1 }, { n: 2 }]);
      const three = await rejoin(room, 1, 3);
      expect(three.joined).toMatchObject({ buffered: 1, gap: false });
      expect(three.payloads).toEqual([{ n: 2 }]);
    });

    it('gives the space back within one window after the messages expire (sweep driven by hand)', async () => {
      const timers = handDrivenTimers();
      harness = await startRelayHarness({ config: fastSender, repeat: timers.repeat });
      const { host } = await roomWithAbsent(1, 3);
      for (let n = 1; n <= 40; n++) {
        host.send({ to: 2, payload: { n, pad: pad(32 * kib) } });
        host.send({ to: 'broadcast', payload: { n, pad: pad(32 * kib) } });
      }
      await settled(host);
      const full = fileBytes(harness.dir);
      expect(full).toBeGreaterThan(2 * mib);
      harness.clock.advance(60_000);
      timers.run('sweep');
      expect(harness.relay.status().buffered).toBe(0);
      expect(fileBytes(harness.dir)).toBeLessThan(256 * kib);
    });
  },
);
