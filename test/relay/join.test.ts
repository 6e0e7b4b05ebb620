import { afterEach, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

let harness: RelayHarness;

afterEach(async () => {
  await harness.close();
});

describe('relay join (contract 6, rules 1-3 and 7)', () => {
  it('answers a valid join with joined: role host, itself as host, the devices present, nothing buffered', async () => {
    harness = await startRelayHarness();
    const room = harness.room(7);
    const { joined } = await harness.joined(room, 7, 21);
    expect(joined).toEqual({
      type: 'joined',
      room,
      device: 21,
      role: 'host',
      host: 21,
      devices: [21],
      buffered: 0,
      gap: false,
    });
  });

  it('makes a second device a member, lists both, and tells the first with a presence frame', async () => {
    harness = await startRelayHarness();
    const room = harness.room(7);
    const first = await harness.joined(room, 7, 1);
    const second = await harness.joined(room, 7, 2);
    expect(second.joined).toMatchObject({ role: 'member', host: 1, devices: [1, 2] });
    expect(await first.client.next('presence')).toEqual({
      type: 'presence',
      room,
      device: 2,
      state: 'joined',
    });
  });

  it('echoes a device id written as a string as a string', async () => {
    harness = await startRelayHarness();
    const client = await harness.client();
    const joined = await client.join(harness.room(3), '4', harness.token(3, 4));
    expect(joined).toMatchObject({ type: 'joined', device: '4', host: '4', devices: ['4'] });
  });

  it('closes a connection that does not join within the join timeout with 4008', async () => {
    harness = await startRelayHarness({ tuning: { joinTimeoutMs: 150 } });
    const client = await harness.client();
    client.send({ type: 'ping' });
    await client.next('pong');
    expect(await client.waitClosed()).toEqual({ code: 4008, reason: 'join timeout' });
  });

  it('does not close a joined connection at the join timeout', async () => {
    harness = await startRelayHarness({ tuning: { joinTimeoutMs: 150 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const late = await harness.client();
    expect((await late.waitClosed()).code).toBe(4008);
    await client.sync();
    expect(client.closeInfo).toBeUndefined();
  });

  it('closes a connection that left its room and does not join again within the join timeout', async () => {
    harness = await startRelayHarness({ tuning: { joinTimeoutMs: 200 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    client.send({ type: 'leave' });
    await client.sync();
    expect(client.closeInfo).toBeUndefined();
    expect((await client.waitClosed()).code).toBe(4008);
  });

  it.each([
    [
      'signed with another secret',
      (h: RelayHarness) => ({ room: h.room(5), device: 9, token: h.token(5, 9, 'other-secret') }),
    ],
    [
      'with a malformed token',
      (h: RelayHarness) => ({ room: h.room(5), device: 9, token: 'not-a-token' }),
    ],
    ['without a token', (h: RelayHarness) => ({ room: h.room(5), device: 9, token: undefined })],
    [
      'whose device is not the token device',
      (h: RelayHarness) => ({ room: h.room(5), device: 10, token: h.token(5, 9) }),
    ],
    [
      'into a room of another user',
      (h: RelayHarness) => ({ room: h.room(6), device: 9, token: h.token(5, 9) }),
    ],
    [
      'into a room id signed with another secret',
      (h: RelayHarness) => ({
        room: createRoomId(5, 'other-secret'),
        device: 9,
        token: h.token(5, 9),
      }),
    ],
    [
      'into a room id that is not signed at all',
      (h: RelayHarness) => ({ room: 'my-room', device: 9, token: h.token(5, 9) }),
    ],
    [
      'with a tampered token',
      (h: RelayHarness) => ({
        room: h.room(5),
        device: 9,
        token: h.token(5, 9).replace(/^5:/, '6:'),
      }),
    ],
  ])('refuses a join %s with auth_failed and close 4001', async (_name, build) => {
    harness = await startRelayHarness();
    const client = await harness.client();
    const { room, device, token } = build(harness);
    client.send({ type: 'join', room, device, token });
    const error = await client.error('auth_failed');
    expect(error.message).toEqual(expect.any(String));
    expect(await client.waitClosed()).toEqual({ code: 4001, reason: 'auth failed' });
    expect(harness.relay.status().rooms).toBe(0);
  });

  it('refuses an hmac relay a djb2 token and accepts djb2 tokens when configured for djb2', async () => {
    harness = await startRelayHarness({ config: { tokenSignature: 'djb2' } });
    const djb2Token = signDeviceToken(
      { userId: 2, deviceId: 3, issuedAt: 1_700_000_000 },
      harness.secret,
      'djb2',
    );
    const room = harness.room(2);
    const good = await harness.client();
    expect(await good.join(room, 3, djb2Token)).toMatchObject({ type: 'joined' });
    const hmacToken = signDeviceToken(
      { userId: 2, deviceId: 4, issuedAt: 1_700_000_000 },
      harness.secret,
      'hmac-sha256',
    );
    const bad = await harness.client();
    expect(await bad.join(room, 4, hmacToken)).toMatchObject({
      type: 'error',
      code: 'auth_failed',
    });
    expect((await bad.waitClosed()).code).toBe(4001);
  });

  it('skips token and room-id validation when the secret is empty', async () => {
    harness = await startRelayHarness({ secret: '' });
    const client = await harness.client();
    const joined = await client.join('any-room-name', 'laptop', 'whatever');
    expect(joined).toMatchObject({
      type: 'joined',
      room: 'any-room-name',
      device: 'laptop',
      role: 'host',
    });
  });

  it('answers a second join on a joined connection with already_joined and keeps it open', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    client.send({ type: 'join', room, device: 1, token: harness.token(1, 1) });
    await client.error('already_joined');
    await client.sync();
    expect(client.closeInfo).toBeUndefined();
  });

  it('replaces the older connection of the same device with 4009, keeping its role and telling nobody', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const host = await harness.joined(room, 1, 1);
    const member = await harness.joined(room, 1, 2);
    await host.client.next('presence');
    const again = await harness.joined(room, 1, 1);
    expect(await host.client.waitClosed()).toEqual({
      code: 4009,
      reason: 'replaced by a newer connection',
    });
    expect(again.joined).toMatchObject({ role: 'host', host: 1, devices: [1, 2] });
    await member.client.sync();
    expect(member.client.frames.filter((f) => f.type === 'presence' || f.type === 'host')).toEqual(
      [],
    );
    member.client.send({ to: 'host', payload: { n: 1 } });
    expect(await again.client.message()).toMatchObject({ from: 2, payload: { n: 1 } });
    expect(harness.relay.status().connections).toBe(2);
  });

  it('lets one device be in two rooms at once without replacing itself', async () => {
    harness = await startRelayHarness();
    const a = await harness.joined(harness.room(1), 1, 1);
    await harness.joined(harness.room(1), 1, 1);
    await a.client.sync();
    expect(a.client.closeInfo).toBeUndefined();
    expect(harness.relay.status().rooms).toBe(2);
  });

  it('refuses a device beyond room.maxDevices with room_full and keeps the connection open', async () => {
    harness = await startRelayHarness({ config: { roomMaxDevices: 2 } });
    const room = harness.room(1);
    await harness.joined(room, 1, 1);
    await harness.joined(room, 1, 2);
    const third = await harness.client();
    expect(await third.join(room, 3, harness.token(1, 3))).toMatchObject({
      type: 'error',
      code: 'room_full',
    });
    await third.sync();
    expect(third.closeInfo).toBeUndefined();
    // a device already in the full room may still replace its connection
    const again = await harness.client();
    expect(await again.join(room, 2, harness.token(1, 2))).toMatchObject({ type: 'joined' });
  });

  it('admits every device of many concurrent joins to one room exactly once with exactly one host', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const clients = await Promise.all(Array.from({ length: 20 }, () => harness.client()));
    const joins = await Promise.all(
      clients.map((client, i) => client.join(room, i + 1, harness.token(1, i + 1))),
    );
    expect(joins.every((f) => f.type === 'joined')).toBe(true);
    expect(joins.filter((f) => f.role === 'host')).toHaveLength(1);
    const host = joins.find((f) => f.role === 'host')!.device;
    expect(joins.every((f) => f.host === host)).toBe(true);
    const [perRoom] = harness.relay.status().perRoom;
    expect(perRoom?.connections).toBe(20);
    expect(new Set(perRoom?.devices)).toEqual(
      new Set(Array.from({ length: 20 }, (_, i) => String(i + 1))),
    );
    const last = joins.find((f) => (f.devices as unknown[]).length === 20);
    expect(last?.devices).toHaveLength(20);
  });

  it('closes every connection of a revoked device with 4003 at once and refuses its token afterwards', async () => {
    harness = await startRelayHarness();
    const roomA = harness.room(1);
    const roomB = harness.room(1);
    const host = await harness.joined(roomA, 1, 5);
    const other = await harness.joined(roomA, 1, 6);
    const inB = await harness.joined(roomB, 1, 5);
    await host.client.next('presence');
    harness.relay.revokeDevice(5);
    expect(await host.client.waitClosed()).toEqual({ code: 4003, reason: 'device revoked' });
    expect((await inB.client.waitClosed()).code).toBe(4003);
    expect(await other.client.next('host')).toEqual({ type: 'host', room: roomA, device: 6 });
    const issuedBefore = signDeviceToken(
      { userId: 1, deviceId: 5, issuedAt: Math.floor(Date.now() / 1000) - 60 },
      harness.secret,
      'hmac-sha256',
    );
    const retry = new RelayClient(harness.wsUrl);
    expect(await retry.join(roomA, 5, issuedBefore)).toMatchObject({ code: 'auth_failed' });
    expect((await retry.waitClosed()).code).toBe(4001);
  });
});
