import { afterEach, describe, expect, it } from 'vitest';
import type { Repeat, RepeatedTask } from '../../server/relay/relay.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

/** Runs the relay's periodic tasks when the test says so, not on a clock. */
function manualRepeat() {
  const tasks = new Map<RepeatedTask, { periodMs: number; run: () => void }>();
  const repeat: Repeat = (task, periodMs, run) => {
    tasks.set(task, { periodMs, run });
    return () => tasks.delete(task);
  };
  const taskOf = (task: RepeatedTask) => {
    const found = tasks.get(task);
    if (found === undefined) throw new Error(`${task} is not scheduled`);
    return found;
  };
  return {
    repeat,
    run: (task: RepeatedTask) => taskOf(task).run(),
    periodMs: (task: RepeatedTask) => taskOf(task).periodMs,
  };
}

async function pair(options: Parameters<typeof startRelayHarness>[0] = {}) {
  harness = await startRelayHarness(options);
  const room = harness.room(1);
  const host = (await harness.joined(room, 1, 1)).client;
  const member = (await harness.joined(room, 1, 2)).client;
  await host.next('presence');
  return { room, host, member };
}

describe('relay limits and liveness (contract 6, rules 5 and 9)', () => {
  it('drops messages beyond the token bucket with rate_limited and keeps the connection', async () => {
    const { host, member } = await pair({ config: { ratePerSecond: 1, rateBurst: 5 } });
    for (let n = 0; n < 20; n++) member.send({ to: 'host', payload: { n } });
    await eventually(() => member.frames.filter((f) => f.code === 'rate_limited').length >= 14);
    // a rate-limited ping gets no pong, so wait on the sender's own errors, then look at the host
    const limited = member.frames.filter((f) => f.code === 'rate_limited').length;
    await eventually(() => host.allMessages().length + limited >= 20);
    expect(host.allMessages().length).toBeLessThanOrEqual(6);
    expect(host.allMessages().map((f) => f.payload)).toEqual(
      Array.from({ length: host.allMessages().length }, (_, n) => ({ n })),
    );
    expect(member.closeInfo).toBeUndefined();
    const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
    expect(metrics).toMatch(/relay_rate_limited_total (1[4-9]|20)\b/);
  });

  it('answers {"type":"ping"} with {"type":"pong"}, joined or not', async () => {
    harness = await startRelayHarness();
    const client = await harness.client();
    client.send({ type: 'ping' });
    expect(await client.next('pong')).toEqual({ type: 'pong' });
    const joined = (await harness.joined(harness.room(1), 1, 1)).client;
    joined.send('{"type":"ping"}');
    await joined.next('pong');
    expect(joined.texts.at(-1)).toBe('{"type":"pong"}');
  });

  it('pings every interval and closes a connection that does not answer, keeping the ones that do', async () => {
    const timers = manualRepeat();
    harness = await startRelayHarness({ tuning: { pingIntervalMs: 80 }, repeat: timers.repeat });
    expect(timers.periodMs('heartbeat')).toBe(80);
    const room = harness.room(1);
    const live = (await harness.joined(room, 1, 1)).client;
    let pings = 0;
    live.socket.on('ping', () => {
      pings++;
    });
    const dead = new RelayClient(harness.wsUrl, { autoPong: false });
    expect(await dead.join(room, 2, harness.token(1, 2))).toMatchObject({ type: 'joined' });
    await live.next('presence');
    // one round pings both; `sync` returns once the relay has read the live one's pong
    timers.run('heartbeat');
    await live.sync();
    expect(pings).toBe(1);
    // the next round finds the dead one silent since the previous ping
    timers.run('heartbeat');
    // the dead device is dropped without leave: presence left, and it is buffered for
    expect(await live.next('presence', 3_000)).toMatchObject({ device: 2, state: 'left' });
    expect((await dead.waitClosed()).code).toBe(1006);
    await live.sync();
    timers.run('heartbeat');
    await live.sync();
    await eventually(() => pings >= 3, 'three pings to the live socket');
    expect(live.closeInfo).toBeUndefined();
    live.send({ to: 2, payload: { later: true } });
    await live.sync();
    const back = await harness.client();
    expect(await back.join(room, 2, harness.token(1, 2))).toMatchObject({ buffered: 1 });
  });

  it('spreads a heartbeat round over the interval instead of pinging everyone at once', async () => {
    // 2 s interval: two slices, one a second; connections 1 and 2 fall in different slices
    const timers = manualRepeat();
    harness = await startRelayHarness({ tuning: { pingIntervalMs: 2_000 }, repeat: timers.repeat });
    expect(timers.periodMs('heartbeat')).toBe(1_000);
    const room = harness.room(1);
    const first = (await harness.joined(room, 1, 1)).client;
    const second = (await harness.joined(room, 1, 2)).client;
    const pinged = [0, 0];
    first.socket.on('ping', () => pinged[0]!++);
    second.socket.on('ping', () => pinged[1]!++);
    const seen: number[][] = [];
    for (let tick = 0; tick < 4; tick++) {
      timers.run('heartbeat');
      // a ping sent in this tick arrives before the answer to a frame sent after it
      await first.sync();
      await second.sync();
      seen.push([...pinged]);
    }
    // each tick pings exactly one of them, never both in the same turn, each once per interval
    const perTick = seen.map((counts, i) => counts.map((n, k) => n - (seen[i - 1]?.[k] ?? 0)));
    for (const delta of perTick) expect(delta.reduce((a, b) => a + b)).toBe(1);
    expect(perTick[0]).toEqual(perTick[2]);
    expect(perTick[1]).toEqual(perTick[3]);
    expect(perTick[0]).not.toEqual(perTick[1]);
    expect(pinged).toEqual([2, 2]);
    expect(first.closeInfo).toBeUndefined();
    expect(second.closeInfo).toBeUndefined();
  });

  it('closes a connection that sends a frame over message.maxBytes with 1009', async () => {
    const { host, member } = await pair({ config: { messageMaxBytes: 1_000 } });
    member.send({ to: 'host', payload: { s: 'x'.repeat(1_000) } });
    expect((await member.waitClosed()).code).toBe(1009);
    expect(await host.next('presence')).toMatchObject({ device: 2, state: 'left' });
    expect(host.allMessages()).toEqual([]);
  });

  it('delivers a frame just under message.maxBytes', async () => {
    const { host, member } = await pair({ config: { messageMaxBytes: 1_000 } });
    const s = 'y'.repeat(900);
    member.send({ to: 'host', payload: { s } });
    expect((await host.message()).payload).toEqual({ s });
  });

  it('closes a connection that sends a binary frame with 1003', async () => {
    const { member } = await pair();
    member.socket.send(Buffer.from('{"to":"host","payload":{}}'), { binary: true });
    expect(await member.waitClosed()).toEqual({
      code: 1003,
      reason: 'binary frames other than chunk-put are not accepted',
    });
  });

  it('carries a deeply nested payload unchanged without crashing', async () => {
    const { room, host, member } = await pair();
    const depth = 50_000;
    const payload = `{"deep":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    member.send(`{"to":"host","payload":${payload}}`);
    await host.message();
    expect(host.texts.at(-1)).toBe(`{"from":2,"to":"host","room":"${room}","payload":${payload}}`);
  });

  it('answers deeply nested garbage with invalid_json and stays up', async () => {
    const { host, member } = await pair();
    member.send(`{"to":"host","payload":${'{"a":'.repeat(100_000)}`);
    await member.error('invalid_json');
    member.send({ to: 'host', payload: { ok: 1 } });
    expect((await host.message()).payload).toEqual({ ok: 1 });
  });

  it('carries a large string payload of nearly 1 MiB intact', async () => {
    const { host, member } = await pair();
    const big = '\u00e9\u{1F600}z'.repeat(100_000);
    member.send({ to: 'host', payload: { big } });
    expect(((await host.message(10_000)).payload as { big: string }).big).toBe(big);
  });

  it('survives a flood from one client while serving the others', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const host = (await harness.joined(room, 1, 1)).client;
    const flooder = (await harness.joined(room, 1, 2)).client;
    const quiet = (await harness.joined(room, 1, 3)).client;
    const junk = [
      '{',
      '[]',
      '{"type":"nope"}',
      '{"to":"host","payload":[]}',
      '{"to":"host","payload":{}}',
    ];
    for (let i = 0; i < 5_000; i++) flooder.send(junk[i % junk.length]!);
    quiet.send({ to: 'host', payload: { still: 'here' } });
    expect(
      (
        await host.take(
          (f) => (f.payload as { still?: string } | undefined)?.still === 'here',
          10_000,
        )
      ).from,
    ).toBe(3);
    await eventually(
      () => flooder.frames.some((f) => f.code === 'rate_limited'),
      'rate_limited',
      10_000,
    );
    expect(flooder.closeInfo).toBeUndefined();
    const health = await fetch(`${harness.statusUrl}/health`);
    expect(health.status).toBe(200);
  });

  it('cuts a receiver that stops reading (1013) and buffers for it instead', async () => {
    const { host, member } = await pair({
      config: { maxQueuedBytes: 1024 * 1024, messageMaxBytes: 256 * 1024 },
    });
    member.socket.pause();
    const chunk = 'z'.repeat(60_000);
    for (
      let n = 0;
      n < 300 && !host.frames.some((f) => f.type === 'presence' && f.state === 'left');
      n++
    ) {
      host.send({ to: 2, payload: { n, chunk } });
      if (n % 20 === 19) await host.sync();
    }
    expect(await host.take((f) => f.type === 'presence' && f.state === 'left')).toMatchObject({
      device: 2,
      reason: 'disconnect',
    });
    const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
    expect(metrics).toContain('relay_slow_receivers_total 1');
    host.send({ to: 2, payload: { after: true } });
    await host.sync();
    const back = await harness.client();
    const joined = await back.join(harness.relay.status().perRoom[0]!.room, 2, harness.token(1, 2));
    // what was routed after the cut, the last one included, is delivered from the buffer
    expect(joined.buffered).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < (joined.buffered as number); i++) await back.message();
    expect((await back.message()).payload).toEqual({ after: true });
  });

  it('never crashes on a join with a huge token or room id', async () => {
    harness = await startRelayHarness();
    const client = await harness.client();
    client.send({ type: 'join', room: 'r'.repeat(100_000), device: 1, token: 't'.repeat(100_000) });
    await client.error('invalid_message');
    client.send({
      type: 'join',
      room: harness.room(1),
      device: 1,
      token: `1:1:1.${'a'.repeat(1_000)}`,
    });
    await client.error('auth_failed');
    expect((await client.waitClosed()).code).toBe(4001);
  });
});
