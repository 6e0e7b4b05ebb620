import { afterEach, describe, expect, it } from 'vitest';
import type { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

/** A room with devices 1 (host), 2 and 3 of user 1, presence frames consumed. */
async function roomOfThree() {
  harness = await startRelayHarness();
  const room = harness.room(1);
  const a = (await harness.joined(room, 1, 1)).client;
  const b = (await harness.joined(room, 1, 2)).client;
  const c = (await harness.joined(room, 1, 3)).client;
  await a.next('presence');
  await a.next('presence');
  await b.next('presence');
  return { room, a, b, c };
}

async function settled(...clients: RelayClient[]): Promise<void> {
  for (const client of clients) await client.sync();
}

describe('relay routing (contract 6, rules 4-6)', () => {
  it('delivers a message to the host with from and room set by the relay and to as written', async () => {
    const { room, a, c } = await roomOfThree();
    c.send({ to: 'host', payload: { op: 'edit', n: 1 }, from: 99, room: 'forged' });
    expect(await a.message()).toEqual({ from: 3, to: 'host', room, payload: { op: 'edit', n: 1 } });
  });

  it('delivers a broadcast to everyone else in the room and not back to the sender', async () => {
    const { room, a, b, c } = await roomOfThree();
    b.send({ to: 'broadcast', payload: { x: true } });
    expect(await a.message()).toEqual({ from: 2, to: 'broadcast', room, payload: { x: true } });
    expect(await c.message()).toEqual({ from: 2, to: 'broadcast', room, payload: { x: true } });
    await settled(b);
    expect(b.allMessages()).toEqual([]);
  });

  it('delivers a direct message only to that device, keeping to as a number or a string', async () => {
    const { a, b, c } = await roomOfThree();
    a.send({ to: 3, payload: { k: 'number' } });
    a.send({ to: '3', payload: { k: 'string' } });
    expect(await c.message()).toMatchObject({ from: 1, to: 3, payload: { k: 'number' } });
    expect(await c.message()).toMatchObject({ from: 1, to: '3', payload: { k: 'string' } });
    await settled(a, b);
    expect(b.allMessages()).toEqual([]);
  });

  it('does not route between rooms', async () => {
    const { a, b } = await roomOfThree();
    const outsider = await harness.joined(harness.room(1), 1, 4);
    outsider.client.send({ to: 'broadcast', payload: {} });
    outsider.client.send({ to: 1, payload: {} });
    await outsider.client.error('unknown_target');
    await settled(outsider.client, a, b);
    expect(a.allMessages()).toEqual([]);
    expect(b.allMessages()).toEqual([]);
  });

  it('delivers the payload byte for byte: big integers, key order, escapes and spacing untouched', async () => {
    const { a, c } = await roomOfThree();
    const payload =
      '{ "big": 123456789012345678901234567890, "z": 1, "a": [1.50, -0, 1e400], "s": "\\u00e9\\n", "__proto__": {"x": 1} }';
    c.send(`{"payload": ${payload}, "to":"host"}`);
    await a.message();
    expect(a.texts.at(-1)).toBe(
      `{"from":3,"to":"host","room":${JSON.stringify(harness.relay.status().perRoom[0]?.room)},"payload":${payload}}`,
    );
  });

  it('takes the last payload when a frame repeats the key, as JSON.parse does', async () => {
    const { a, c } = await roomOfThree();
    c.send('{"payload":{"first":1},"to":"host","payload":{"second":2}}');
    expect((await a.message()).payload).toEqual({ second: 2 });
  });

  it.each([
    ['an array', []],
    ['null', null],
    ['a string', 'text'],
    ['a number', 5],
  ])(
    'refuses a payload that is %s with invalid_message and keeps the connection',
    async (_name, payload) => {
      const { a, c } = await roomOfThree();
      c.send({ to: 'host', payload });
      await c.error('invalid_message');
      await settled(c, a);
      expect(a.allMessages()).toEqual([]);
      expect(c.closeInfo).toBeUndefined();
    },
  );

  it('answers a message to a device not in the room with unknown_target', async () => {
    const { a } = await roomOfThree();
    a.send({ to: 42, payload: {} });
    expect(await a.error('unknown_target')).toMatchObject({
      type: 'error',
      code: 'unknown_target',
    });
    a.send({ to: 1, payload: {} });
    await a.error('unknown_target');
    a.send({ to: 'host', payload: {} });
    await a.error('unknown_target');
    await a.sync();
    expect(a.closeInfo).toBeUndefined();
  });

  it('answers a message before join with not_joined and a leave before join with not_joined', async () => {
    harness = await startRelayHarness();
    const client = await harness.client();
    client.send({ to: 'broadcast', payload: {} });
    await client.error('not_joined');
    client.send({ type: 'leave' });
    await client.error('not_joined');
    await client.sync();
    expect(client.closeInfo).toBeUndefined();
  });

  it.each([
    ['malformed JSON', '{"to": "host", payload', 'invalid_json'],
    ['an empty frame', '', 'invalid_json'],
    ['a JSON array', '[1,2]', 'invalid_message'],
    ['a JSON string', '"join"', 'invalid_message'],
    ['an unknown type', '{"type":"subscribe"}', 'invalid_message'],
    ['a non-string type', '{"type":7}', 'invalid_message'],
    [
      'a join with a numeric room',
      '{"type":"join","room":5,"device":1,"token":"x"}',
      'invalid_message',
    ],
    [
      'a join with an object device',
      '{"type":"join","room":"r","device":{},"token":"x"}',
      'invalid_message',
    ],
    [
      'a join with a negative device',
      '{"type":"join","room":"r","device":-1,"token":"x"}',
      'invalid_message',
    ],
    ['a message without to', '{"payload":{}}', 'invalid_message'],
    ['a message with to an object', '{"to":{"a":1},"payload":{}}', 'invalid_message'],
    ['a message without payload', '{"to":"host"}', 'invalid_message'],
  ])('answers %s with %s and keeps the connection open', async (_name, text, code) => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    client.send(text);
    const error = await client.error(code);
    expect(Object.keys(error).sort()).toEqual(['code', 'message', 'type']);
    await client.sync();
    expect(client.closeInfo).toBeUndefined();
  });

  it('leaves cleanly on leave: presence left to the others, then a host frame to everyone for the new host', async () => {
    const { room, a, b, c } = await roomOfThree();
    a.send({ type: 'leave' });
    expect(await b.next('presence')).toMatchObject({
      type: 'presence',
      room,
      device: 1,
      state: 'left',
    });
    expect(await b.next('host')).toEqual({ type: 'host', room, device: 2 });
    expect(await c.next('host')).toEqual({ type: 'host', room, device: 2 });
    c.send({ to: 'host', payload: { n: 1 } });
    expect(await b.message()).toMatchObject({ from: 3, to: 'host' });
    expect(harness.relay.status().perRoom[0]?.devices).toEqual(['2', '3']);
  });

  it('hands the host role to the longest-connected device when the host drops abruptly', async () => {
    const { room, a, b, c } = await roomOfThree();
    a.terminate();
    expect(await b.next('host')).toEqual({ type: 'host', room, device: 2 });
    expect(await c.next('host')).toEqual({ type: 'host', room, device: 2 });
    const d = await harness.joined(room, 1, 4);
    expect(d.joined).toMatchObject({ role: 'member', host: 2, devices: [2, 3, 4] });
  });

  it('makes the rejoining former host a member', async () => {
    const { room, a, b } = await roomOfThree();
    a.send({ type: 'leave' });
    await b.next('host');
    const back = await a.join(room, 1, harness.token(1, 1));
    expect(back).toMatchObject({ type: 'joined', role: 'member', host: 2, devices: [2, 3, 1] });
  });

  it('sends no host frame when a member leaves', async () => {
    const { a, b, c } = await roomOfThree();
    c.send({ type: 'leave' });
    await a.next('presence');
    await settled(c, a, b);
    expect(a.frames.some((f) => f.type === 'host')).toBe(false);
  });
});
