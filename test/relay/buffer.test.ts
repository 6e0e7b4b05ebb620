import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import { type Frame, RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

const payloads = (frames: Frame[]) => frames.map((frame) => frame.payload);

/** Host 1 and member 2 of user 1; device 2 then drops without leave and the host sees it. */
async function memberDropped(options: Parameters<typeof startRelayHarness>[0] = {}) {
  harness = await startRelayHarness(options);
  const room = harness.room(1);
  const host = (await harness.joined(room, 1, 1)).client;
  const member = (await harness.joined(room, 1, 2)).client;
  await host.next('presence');
  member.terminate();
  expect(await host.next('presence')).toMatchObject({ device: 2, state: 'left' });
  return { room, host };
}

async function rejoin(room: string, deviceId = 2): Promise<{ client: RelayClient; joined: Frame }> {
  const client = await harness.client();
  const joined = await client.join(room, deviceId, harness.token(1, deviceId));
  return { client, joined };
}

// The whole suite on both engines: better-sqlite3, and sql.js as when the addon cannot load.
describe.each(['native', 'wasm'] as const)(
  'relay durable buffer (contract 6, rule 8) on the %s SQLite engine',
  (engine) => {
    beforeAll(async () => {
      await chooseSqliteEngine(engine, createLogger('silent'));
    });

    it('delivers direct and broadcast messages sent while a device was away, first, in order, with joined.buffered', async () => {
      const { room, host } = await memberDropped();
      host.send({ to: 2, payload: { n: 1 } });
      host.send({ to: 'broadcast', payload: { n: 2 } });
      host.send({ to: '2', payload: { n: 3 } });
      await host.sync();
      const { client, joined } = await rejoin(room);
      expect(joined).toMatchObject({
        type: 'joined',
        role: 'member',
        buffered: 3,
        gap: false,
        devices: [1, 2],
      });
      host.send({ to: 2, payload: { n: 4 } });
      for (const n of [1, 2, 3, 4]) expect((await client.message()).payload).toEqual({ n });
      const index = (n: number) =>
        client.frames.findIndex((f) => (f.payload as { n?: number } | undefined)?.n === n);
      expect(client.frames.findIndex((f) => f.type === 'joined')).toBeLessThan(index(1));
      expect(client.frames[index(1)]).toEqual({ from: 1, to: 2, room, payload: { n: 1 } });
      expect(client.frames[index(2)]).toEqual({
        from: 1,
        to: 'broadcast',
        room,
        payload: { n: 2 },
      });
    });

    it('delivers buffered messages exactly once: the next join gets none', async () => {
      const { room, host } = await memberDropped();
      host.send({ to: 2, payload: { n: 1 } });
      await host.sync();
      const first = await rejoin(room);
      expect(first.joined.buffered).toBe(1);
      await first.client.message();
      await first.client.close();
      await host.next('presence');
      await host.next('presence').catch(() => undefined);
      const second = await rejoin(room);
      expect(second.joined).toMatchObject({ buffered: 0, gap: false });
      await second.client.sync();
      expect(second.client.allMessages()).toEqual([]);
    });

    it('buffers nothing for a device that left with leave: direct messages to it are unknown_target', async () => {
      harness = await startRelayHarness();
      const room = harness.room(1);
      const host = (await harness.joined(room, 1, 1)).client;
      const member = (await harness.joined(room, 1, 2)).client;
      await host.next('presence');
      member.send({ type: 'leave' });
      await host.next('presence');
      host.send({ to: 2, payload: {} });
      await host.error('unknown_target');
      host.send({ to: 'broadcast', payload: {} });
      await host.sync();
      expect(harness.relay.status().buffered).toBe(0);
      const { joined } = await rejoin(room);
      expect(joined).toMatchObject({ buffered: 0, gap: false });
    });

    it('drops the buffer after buffer.seconds: the rejoin gets nothing and gap true, later messages are unknown_target', async () => {
      const { room, host } = await memberDropped();
      host.send({ to: 2, payload: { n: 1 } });
      await host.sync();
      harness.clock.advance(60_000);
      host.send({ to: 2, payload: { n: 2 } });
      await host.error('unknown_target');
      const { client, joined } = await rejoin(room);
      expect(joined).toMatchObject({ buffered: 0, gap: true });
      await client.sync();
      expect(client.allMessages()).toEqual([]);
    });

    it('still delivers a message sent just before the window ends', async () => {
      const { room, host } = await memberDropped();
      harness.clock.advance(59_999);
      host.send({ to: 2, payload: { n: 1 } });
      await host.sync();
      const { client, joined } = await rejoin(room);
      expect(joined).toMatchObject({ buffered: 1, gap: false });
      expect((await client.message()).payload).toEqual({ n: 1 });
    });

    it('purges expired messages periodically and counts them as dropped', async () => {
      const { host } = await memberDropped({ tuning: { purgeIntervalMs: 20 } });
      host.send({ to: 2, payload: {} });
      host.send({ to: 2, payload: {} });
      await eventually(() => harness.relay.status().buffered === 2);
      harness.clock.advance(61_000);
      await eventually(() => harness.relay.status().buffered === 0);
      const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
      expect(metrics).toContain('relay_messages_dropped_total{reason="expired"} 2');
    });

    it('keeps at most buffer.maxMessages per device, dropping the oldest, and reports gap', async () => {
      const { room, host } = await memberDropped({ config: { bufferMaxMessages: 5 } });
      for (let n = 1; n <= 8; n++) host.send({ to: 2, payload: { n } });
      await host.sync();
      const { client, joined } = await rejoin(room);
      expect(joined).toMatchObject({ buffered: 5, gap: true });
      const got: unknown[] = [];
      for (let i = 0; i < 5; i++) got.push((await client.message()).payload);
      expect(got).toEqual([4, 5, 6, 7, 8].map((n) => ({ n })));
      const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
      expect(metrics).toContain('relay_messages_dropped_total{reason="cap"} 3');
    });

    it('keeps at most buffer.deviceMaxBytes per device, dropping the oldest', async () => {
      const { room, host } = await memberDropped({ config: { bufferDeviceMaxBytes: 1_000 } });
      for (let n = 1; n <= 10; n++) host.send({ to: 2, payload: { n, pad: 'x'.repeat(200) } });
      await host.sync();
      const { client, joined } = await rejoin(room);
      expect(joined.gap).toBe(true);
      expect(joined.buffered).toBeGreaterThan(0);
      expect(joined.buffered).toBeLessThan(5);
      const got: Frame[] = [];
      for (let i = 0; i < (joined.buffered as number); i++) got.push(await client.message());
      expect(got.at(-1)?.payload).toMatchObject({ n: 10 });
      expect(got.reduce((sum, f) => sum + JSON.stringify(f).length, 0)).toBeLessThanOrEqual(1_000);
    });

    it('survives a relay restart: buffered messages are delivered after it, and devices connected at shutdown are buffered for', async () => {
      const { room, host } = await memberDropped();
      host.send({ to: 2, payload: { n: 1 } });
      await host.sync();
      // device 3 is connected when the relay stops: it gets 1001 and is absent afterwards
      const third = (await harness.joined(room, 1, 3)).client;
      const dir = harness.dir;
      const clock = harness.clock;
      await harness.close({ keepDir: true });
      expect((await third.waitClosed()).code).toBe(1001);
      expect((await host.waitClosed()).code).toBe(1001);

      harness = await startRelayHarness({ dir, clock });
      const back = await rejoin(room, 1);
      expect(back.joined).toMatchObject({ role: 'host', buffered: 0 });
      back.client.send({ to: 'broadcast', payload: { n: 2 } });
      back.client.send({ to: 3, payload: { n: 3 } });
      await back.client.sync();
      const two = await rejoin(room, 2);
      expect(two.joined).toMatchObject({ buffered: 2, gap: false });
      expect(payloads([await two.client.message(), await two.client.message()])).toEqual([
        { n: 1 },
        { n: 2 },
      ]);
      const three = await rejoin(room, 3);
      expect(three.joined).toMatchObject({ buffered: 2 });
      expect(payloads([await three.client.message(), await three.client.message()])).toEqual([
        { n: 2 },
        { n: 3 },
      ]);
    });

    it('delivers each buffered message exactly once across a storm of concurrent rejoins of one device', async () => {
      const { room, host } = await memberDropped();
      for (let n = 1; n <= 50; n++)
        host.send({ to: n % 2 === 0 ? 'broadcast' : 2, payload: { n } });
      await host.sync();
      const clients = await Promise.all(Array.from({ length: 10 }, () => harness.client()));
      const token = harness.token(1, 2);
      for (const client of clients) client.send({ type: 'join', room, device: 2, token });
      const joins = await Promise.all(clients.map((client) => client.next('joined')));
      expect(joins.reduce((sum, f) => sum + (f.buffered as number), 0)).toBe(50);
      // every connection but the last was replaced; all frames sent before the close arrive
      await Promise.all(clients.slice(0, -1).map((client) => client.waitClosed()));
      const received = clients.flatMap((client) =>
        client.allMessages().map((f) => (f.payload as { n: number }).n),
      );
      expect(received).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    });

    it('neither loses nor duplicates messages when a device drops and rejoins many times while the host keeps sending', async () => {
      const { room, host } = await memberDropped();
      const received: number[] = [];
      for (let n = 1; n <= 15; n++) {
        host.send({ to: 'broadcast', payload: { n } });
        const { client, joined } = await rejoin(room);
        for (let i = 0; i < (joined.buffered as number); i++) {
          received.push(((await client.message()).payload as { n: number }).n);
        }
        client.terminate();
        await host.take((f) => f.type === 'presence' && f.state === 'left');
      }
      await host.sync();
      const last = await rejoin(room);
      for (let i = 0; i < (last.joined.buffered as number); i++) {
        received.push(((await last.client.message()).payload as { n: number }).n);
      }
      expect(received).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    });

    it('reports buffered messages as committed to SQLite in status and metrics', async () => {
      const { host } = await memberDropped();
      for (let n = 0; n < 100; n++) host.send({ to: 2, payload: { n } });
      await host.sync();
      await eventually(() => harness.relay.status().buffered === 100);
      const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
      expect(metrics).toContain('relay_buffer_messages 100');
      expect(metrics).toContain('relay_messages_buffered_total 100');
      const flushes = Number(/relay_buffer_flushes_total (\d+)/.exec(metrics)?.[1]);
      expect(flushes).toBeGreaterThan(0);
      expect(flushes).toBeLessThan(50);
    });

    it('buffers only for the room the device dropped from', async () => {
      const { host } = await memberDropped();
      const elsewhere = harness.room(1);
      const other = (await harness.joined(elsewhere, 1, 5)).client;
      other.send({ to: 2, payload: {} });
      await other.error('unknown_target');
      host.send({ to: 2, payload: {} });
      await host.sync();
      const fresh = new RelayClient(harness.wsUrl);
      const joined = await fresh.join(elsewhere, 2, harness.token(1, 2));
      expect(joined).toMatchObject({ buffered: 0 });
      fresh.terminate();
    });
  },
);
