/**
 * `npm run bench:buffer-cpu`: the durable buffer alone (server/relay/buffer.ts on a fresh
 * relay.db in a temp dir, no sockets), CPU time of this process per stored reference (one absent
 * device and frame). CPU time rather than wall time, so that a machine shared with other work
 * scatters it less. Shapes:
 *   bench   25 rooms, 3 absent devices each, 1,000 small broadcasts per room (bench:quick's buffer)
 *   cap     the same with buffer.maxMessages 100: every device sits at its cap, every commit trims
 *   bound   the same with buffer.maxBytes 256 KiB: every commit drops the oldest frames
 *   wide    1 room, 63 absent devices, 200 broadcasts of 4 KiB
 * Each shape ends with a replay (every device joins and takes its frames), timed on its own.
 * Flags: --shapes=bench,cap (default all), --repeat=N runs of each (default 5; the median is printed).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type AbsentDevice, type BufferLimits, openMessageBuffer } from '../server/relay/buffer.ts';
import { createRoomId } from '../server/tokens.ts';

interface Shape {
  rooms: number;
  absent: number;
  broadcasts: number;
  payloadBytes: number;
  limits?: Partial<BufferLimits>;
}

const shapes: Record<string, Shape> = {
  bench: { rooms: 25, absent: 3, broadcasts: 1_000, payloadBytes: 48 },
  cap: { rooms: 25, absent: 3, broadcasts: 1_000, payloadBytes: 48, limits: { maxMessages: 100 } },
  bound: {
    rooms: 25,
    absent: 3,
    broadcasts: 1_000,
    payloadBytes: 48,
    limits: { maxBytes: 256 * 1024 },
  },
  wide: { rooms: 1, absent: 63, broadcasts: 200, payloadBytes: 4_096 },
};

/** Messages routed between two commits (the relay commits once per event-loop turn). */
const messagesPerCommit = 256;

const defaults: BufferLimits = {
  windowMs: 60_000,
  maxMessages: 10_000,
  deviceMaxBytes: 16 * 1024 * 1024,
  userMaxBytes: 64 * 1024 * 1024,
  maxBytes: 256 * 1024 * 1024,
  expiredRetentionMs: 60_000,
};

const noEvents = {
  droppedExpired() {},
  droppedCap() {},
  droppedBound() {},
  flushed() {},
  failed(err: unknown) {
    throw err;
  },
  recovered() {},
  unhealthy(err: unknown) {
    throw err;
  },
  opened() {},
};

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1_000;
};

/** One run: µs of CPU per stored reference while storing, and per reference replayed. */
function run(shape: Shape): { store: number; replay: number } {
  const dir = mkdtempSync(join(tmpdir(), 'buffer-cpu-'));
  try {
    const buffer = openMessageBuffer(
      join(dir, 'relay.db'),
      { ...defaults, ...shape.limits },
      noEvents,
    );
    const now = Date.now();
    const rooms = Array.from({ length: shape.rooms }, (_, r) => {
      const room = createRoomId(r + 1, 'buffer-cpu-secret-0123456789');
      const devices = Array.from(
        { length: shape.absent },
        (_, d): AbsentDevice => buffer.markAbsent(room, String(d + 2), now),
      );
      return { room, devices };
    });
    buffer.flush();
    const payload = `{"op":"edit","doc":"bench","data":"${'x'.repeat(shape.payloadBytes)}"}`;
    let references = 0;
    let inCommit = 0;
    const storeStart = cpuMs();
    for (let n = 0; n < shape.broadcasts; n++) {
      for (const { room, devices } of rooms) {
        const frame = `{"from":1,"to":"broadcast","room":"${room}","payload":${payload}}`;
        buffer.append(devices, frame, Buffer.byteLength(frame));
        references += devices.length;
        if (++inCommit === messagesPerCommit) {
          buffer.flush();
          inCommit = 0;
        }
      }
    }
    buffer.flush();
    const storeMs = cpuMs() - storeStart;
    const kept = buffer.stored;
    const replayStart = cpuMs();
    let replayed = 0;
    for (const { room, devices } of rooms) {
      for (const { device } of devices) {
        buffer.takeOver(room, device, now + 1, (frames) => {
          replayed += frames.length;
        });
      }
    }
    const replayMs = cpuMs() - replayStart;
    if (replayed !== kept) throw new Error(`replayed ${replayed} of ${kept} kept`);
    buffer.close();
    return {
      store: (storeMs * 1_000) / references,
      replay: (replayMs * 1_000) / Math.max(1, replayed),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

const { values } = parseArgs({
  options: { shapes: { type: 'string' }, repeat: { type: 'string', default: '5' } },
});
const chosen = values.shapes?.split(',') ?? Object.keys(shapes);
const repeat = Number(values.repeat);
for (const name of chosen) {
  const shape = shapes[name];
  if (shape === undefined)
    throw new Error(`unknown shape ${name}: ${Object.keys(shapes).join(', ')}`);
  const runs = Array.from({ length: repeat }, () => run(shape));
  const store = median(runs.map((r) => r.store));
  const replay = median(runs.map((r) => r.replay));
  console.log(
    `${name}: store ${store.toFixed(2)} µs CPU per reference (${runs.map((r) => r.store.toFixed(2)).join(' ')}), replay ${replay.toFixed(2)} µs per reference`,
  );
}
