import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RelayConfig } from '../../server/config/relay-config.ts';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import {
  fastSender,
  handDrivenTimers,
  kib,
  pad,
  referenceCounts,
  rejoin,
  roomWithAbsent,
  settled,
} from '../helpers/relay-buffer.ts';
import type { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

// A frame kept for several absent devices is one row counting its references (`refs`): it stays
// while any device still refers to it and goes with the last reference, whichever way that goes.

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

/** relay.db holds exactly these frames (oldest first) with these counts, each count true. */
function expectFrames(refs: number[]): Array<{ id: number; refs: number }> {
  const counts = referenceCounts(harness.dir);
  expect(counts.dangling).toBe(0);
  expect(counts.frames.map((f) => [f.refs, f.references])).toEqual(refs.map((n) => [n, n]));
  return counts.frames;
}

/** Device `device` of user 1 joins `room` and drops without leave. */
async function drop(room: string, host: RelayClient, device: number): Promise<void> {
  const { client } = await harness.joined(room, 1, device);
  await host.take((f) => f.type === 'presence' && f.state === 'joined' && f.device === device);
  client.terminate();
  await host.take((f) => f.type === 'presence' && f.state === 'left' && f.device === device);
}

describe.each(['native', 'wasm'] as const)(
  'relay buffer reference counts on the %s SQLite engine',
  (engine) => {
    beforeAll(async () => {
      await chooseSqliteEngine(engine, createLogger('silent'));
    });

    it('keeps a broadcast for 3 devices until the last of them has taken it on its join', async () => {
      harness = await startRelayHarness();
      const { room, host } = await roomWithAbsent(harness, 1, 3);
      host.send({ to: 'broadcast', payload: { n: 1 } });
      await settled(harness, host);
      expectFrames([3]);
      for (const [device, left] of [
        [2, 2],
        [3, 1],
      ] as const) {
        const back = await rejoin(harness, room, 1, device);
        expect(back.payloads).toEqual([{ n: 1 }]);
        await eventually(() => referenceCounts(harness.dir).frames[0]?.refs === left);
        expectFrames([left]);
      }
      const last = await rejoin(harness, room, 1, 4);
      expect(last.payloads).toEqual([{ n: 1 }]);
      await eventually(() => referenceCounts(harness.dir).frames.length === 0, 'the frame gone');
      expect(referenceCounts(harness.dir)).toEqual({ frames: [], dangling: 0, devices: 0 });
    });

    it('keeps a broadcast while one of its devices expires and drops it when the last one does', async () => {
      const timers = handDrivenTimers();
      harness = await startRelayHarness({ repeat: timers.repeat });
      const { room, host } = await roomWithAbsent(harness, 1, 1);
      harness.clock.advance(30_000);
      await drop(room, host, 3);
      await drop(room, host, 4);
      host.send({ to: 'broadcast', payload: { n: 1 } });
      await settled(harness, host);
      expectFrames([3]);
      // device 2's window (60 s) ends first
      harness.clock.advance(31_000);
      timers.run('sweep');
      expectFrames([2]);
      expect(referenceCounts(harness.dir).devices).toBe(2);
      harness.clock.advance(30_000);
      timers.run('sweep');
      expect(referenceCounts(harness.dir)).toEqual({ frames: [], dangling: 0, devices: 0 });
      const late = await rejoin(harness, room, 1, 3);
      expect(late.joined).toMatchObject({ buffered: 0, gap: true });
    });

    it.each([
      ['buffer.maxMessages', { bufferMaxMessages: 2 }],
      ['buffer.deviceMaxBytes', { bufferDeviceMaxBytes: 1_500 }],
    ] as Array<[string, Partial<RelayConfig>]>)(
      'keeps a broadcast that one device lost to %s for the others, and drops it when the last loses it',
      async (_, config) => {
        harness = await startRelayHarness({ config: { ...fastSender, ...config } });
        const { room, host } = await roomWithAbsent(harness, 1, 3);
        // ~1.1 KiB, then two direct messages of ~0.4 KiB each push it out of a device's cap
        host.send({ to: 'broadcast', payload: { n: 0, pad: pad(1_000) } });
        const directs = (device: number) => {
          for (const n of [1, 2]) host.send({ to: device, payload: { n, pad: pad(300) } });
        };
        directs(2);
        await settled(harness, host);
        expectFrames([2, 1, 1]);
        directs(3);
        directs(4);
        await settled(harness, host);
        expectFrames([1, 1, 1, 1, 1, 1]);
        const back = await rejoin(harness, room, 1, 2);
        expect(back.joined).toMatchObject({ buffered: 2, gap: true });
        expect(back.payloads.map((p) => p.n)).toEqual([1, 2]);
      },
    );

    it.each([
      ['buffer.userMaxBytes', 'user', { bufferUserMaxBytes: 16 * kib }],
      ['buffer.maxBytes', 'buffer', { bufferMaxBytes: 16 * kib }],
    ] as Array<[string, string, Partial<RelayConfig>]>)(
      'drops a broadcast for all its devices at once when %s needs its room',
      async (_, scope, config) => {
        harness = await startRelayHarness({ config: { ...fastSender, ...config } });
        const { room, host } = await roomWithAbsent(harness, 1, 3);
        host.send({ to: 'broadcast', payload: { n: 0, pad: pad(4 * kib) } });
        await settled(harness, host);
        const [first] = expectFrames([3]);
        // ~4.7 KiB counted per broadcast (frame, 3 references): the bound holds 3 of them
        for (let n = 1; n <= 5; n++)
          host.send({ to: 'broadcast', payload: { n, pad: pad(4 * kib) } });
        await settled(harness, host);
        const frames = expectFrames([3, 3, 3]);
        expect(frames.map((f) => f.id)).not.toContain(first?.id);
        expect(referenceCounts(harness.dir).devices).toBe(3);
        const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
        expect(metrics).toContain(`relay_messages_dropped_total{reason="${scope}_bound"} 9`);
        for (const device of [2, 3, 4]) {
          const back = await rejoin(harness, room, 1, device);
          expect(back.joined).toMatchObject({ buffered: 3, gap: true });
          expect(back.payloads.map((p) => p.n)).toEqual([3, 4, 5]);
        }
        await eventually(
          () => referenceCounts(harness.dir).frames.length === 0,
          'every frame gone',
        );
        expect(referenceCounts(harness.dir)).toEqual({ frames: [], dangling: 0, devices: 0 });
      },
    );

    it('forgets the device row of a device that a bound left with nothing, at its join', async () => {
      harness = await startRelayHarness({
        config: { ...fastSender, bufferUserMaxBytes: 16 * kib },
      });
      const first = await roomWithAbsent(harness, 1, 1);
      first.host.send({ to: 'broadcast', payload: { n: 0, pad: pad(4 * kib) } });
      await settled(harness, first.host);
      // another room of the same user pushes that frame out of the user's bound
      const second = await roomWithAbsent(harness, 1, 1, 10);
      for (let n = 1; n <= 4; n++) {
        second.host.send({ to: 'broadcast', payload: { n, pad: pad(4 * kib) } });
      }
      await settled(harness, second.host);
      expect(referenceCounts(harness.dir).devices).toBe(2);
      expectFrames([1, 1, 1]);
      const emptied = await rejoin(harness, first.room, 1, 2);
      expect(emptied.joined).toMatchObject({ buffered: 0, gap: true });
      await eventually(() => referenceCounts(harness.dir).devices === 1, 'its row gone');
      expectFrames([1, 1, 1]);
    });
  },
);
