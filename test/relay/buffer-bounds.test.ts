import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import {
  fastSender,
  fileBytes,
  handDrivenTimers,
  kib,
  metric as metricOf,
  mib,
  pad,
  rejoin as rejoinOf,
  roomWithAbsent as roomOf,
  rows,
  settled as settledOf,
  sizeOf,
} from '../helpers/relay-buffer.ts';
import type { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

/** What the WAL may hold besides the database: 1,000 pages before a checkpoint, plus a commit. */
const walAllowance = 5 * mib;

const metric = (name: string) => metricOf(harness, name);
const roomWithAbsent = (userId: number, absent: number, firstDevice = 1) =>
  roomOf(harness, userId, absent, firstDevice);
const settled = (host: RelayClient) => settledOf(harness, host);
const rejoin = (room: string, userId: number, deviceId: number) =>
  rejoinOf(harness, room, userId, deviceId);

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
