import { afterEach, describe, expect, it } from 'vitest';
import { tcpOf } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

const chunk = 'z'.repeat(64_000);

describe('a receiver that stops reading (relay.maxQueuedBytes)', () => {
  it('is closed with 1013 while the others keep getting everything, and gets what it missed from the buffer', async () => {
    harness = await startRelayHarness({
      config: {
        maxQueuedBytes: 2 * 1024 * 1024,
        messageMaxBytes: 128 * 1024,
        ratePerSecond: 100_000,
        rateBurst: 100_000,
      },
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
