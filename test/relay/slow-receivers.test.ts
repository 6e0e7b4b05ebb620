import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { metricAt } from '../helpers/metrics.ts';
import { tcpOf } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

const chunk = 'z'.repeat(64_000);
/** 2 MiB unsent per receiver; frames of 128 KiB; no rate limit in the way. */
const bounds = {
  maxQueuedBytes: 2 * 1024 * 1024,
  messageMaxBytes: 128 * 1024,
  ratePerSecond: 100_000,
  rateBurst: 100_000,
};

describe('a receiver that stops reading (relay.maxQueuedBytes)', () => {
  it('is closed with 1013 while the others keep getting everything, and gets what it missed from the buffer', async () => {
    harness = await startRelayHarness({
      config: bounds,
      // the sender's pongs wait for the paused receiver this long at most (see the pace below)
      tuning: { paceHoldMs: 100 },
    });
    const room = harness.room(1);
    const sender = (await harness.joined(room, 1, 1)).client;
    const reader = (await harness.joined(room, 1, 2)).client;
    const slow = (await harness.joined(room, 1, 3)).client;
    await sender.next('presence');
    await sender.next('presence');
    await reader.next('presence');
    tcpOf(slow).pause();

    // 64 KB broadcasts until the relay gives up on the paused receiver; 40 MB at most (on a
    // relay that holds everything for it, it is never closed)
    let sent = 0;
    const cut = () => sender.frames.some((f) => f.type === 'presence' && f.state === 'left');
    while (!cut() && sent < 640) {
      sender.send({ to: 'broadcast', payload: { n: sent++, chunk } });
      if (sent % 8 === 0) await sender.sync();
    }
    expect(await sender.take((f) => f.type === 'presence' && f.state === 'left')).toMatchObject({
      device: 3,
      reason: 'disconnect',
    });
    for (let i = 0; i < 5; i++) sender.send({ to: 'broadcast', payload: { n: sent++, chunk } });
    await sender.sync();

    // the paused client reads what had reached its socket, then the close frame
    tcpOf(slow).resume();
    expect((await slow.waitClosed(10_000)).code).toBe(1013);
    const all = Array.from({ length: sent }, (_, n) => n);
    await reader.take((f) => (f.payload as { n?: number } | undefined)?.n === sent - 1, 10_000);
    expect(reader.allMessages().map((f) => (f.payload as { n: number }).n)).toEqual(all);
    expect(reader.closeInfo).toBeUndefined();

    // back again: what it had not received is delivered from the buffer, once, in order
    const live = slow.allMessages().map((f) => (f.payload as { n: number }).n);
    const back = (await harness.joined(room, 1, 3)).client;
    const joined = back.frames.find((f) => f.type === 'joined');
    expect(joined).toMatchObject({ buffered: sent - live.length, gap: false });
    for (let i = 0; i < sent - live.length; i++) await back.message();
    const replayed = back.allMessages().map((f) => (f.payload as { n: number }).n);
    expect([...live, ...replayed]).toEqual(all);
    const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
    expect(metrics).toContain('relay_slow_receivers_total 1');
  }, 60_000);
});

describe('a sender whose receiver is behind (the pace)', () => {
  it('gets its pong once the receiver read below a quarter of relay.maxQueuedBytes: nobody is closed, nothing is lost', async () => {
    harness = await startRelayHarness({
      config: bounds,
      tuning: { paceHoldMs: 60_000 },
    });
    const room = harness.room(1);
    const sender = (await harness.joined(room, 1, 1)).client;
    const slow = (await harness.joined(room, 1, 2)).client;
    await sender.next('presence');
    tcpOf(slow).pause();
    const paced = () => metricAt(harness.statusUrl, 'relay_paced_pongs_total');

    // a window of 512 KB, then its ping, as the client library does, until a pong is held
    let sent = 0;
    while ((await paced()) === 0 && sent < 640) {
      for (let i = 0; i < 8; i++) sender.send({ to: 'broadcast', payload: { n: sent++, chunk } });
      sender.send({ type: 'ping' });
      await eventually(
        async () => sender.pingsUnanswered === 0 || (await paced()) > 0,
        'the pong, or its hold',
      );
    }
    expect(await paced()).toBeGreaterThan(0);
    await delay(300);
    const held = sender.pingsUnanswered;

    // it reads again: the pong comes, the sender goes on, the receiver gets everything
    tcpOf(slow).resume();
    await sender.take((f) => f.type === 'pong', 10_000);
    for (let i = 0; i < 8; i++) sender.send({ to: 'broadcast', payload: { n: sent++, chunk } });
    await sender.sync();
    await slow.take((f) => (f.payload as { n?: number } | undefined)?.n === sent - 1, 10_000);
    expect(slow.allMessages().map((f) => (f.payload as { n: number }).n)).toEqual(
      Array.from({ length: sent }, (_, n) => n),
    );
    expect(held).toBe(1);
    expect(slow.closeInfo).toBeUndefined();
    expect(await metricAt(harness.statusUrl, 'relay_slow_receivers_total')).toBe(0);
  }, 60_000);
});
