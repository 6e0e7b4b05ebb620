import { afterEach, describe, expect, it } from 'vitest';
import { djb2 } from '../../server/hashing.ts';
import { roomSlot } from '../../server/relay/shards.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('relay status port', () => {
  it('reports health with room and connection counts', async () => {
    harness = await startRelayHarness();
    const h = harness;
    await h.joined(h.room(1), 1, 1);
    await h.joined(h.room(1), 1, 2);
    await h.client();
    const response = await fetch(`${h.statusUrl}/health`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(await response.json()).toEqual({ status: 'ok', rooms: 2, connections: 3 });
  });

  it('serves Prometheus metrics for connections, rooms, routed, buffered, dropped and auth failures', async () => {
    harness = await startRelayHarness();
    const h = harness;
    const room = h.room(1);
    const host = (await h.joined(room, 1, 1)).client;
    const member = (await h.joined(room, 1, 2)).client;
    await host.next('presence');
    member.send({ to: 'host', payload: {} });
    await host.message();
    member.send('not json');
    await member.error('invalid_json');
    const intruder = await h.client();
    await intruder.join(room, 9, h.token(2, 9));
    await intruder.waitClosed();
    const response = await fetch(`${h.statusUrl}/metrics`);
    expect(response.headers.get('content-type')).toContain('text/plain; version=0.0.4');
    const text = await response.text();
    for (const line of [
      'relay_connections 2',
      'relay_rooms 1',
      'relay_messages_routed_total 1',
      'relay_messages_delivered_total 1',
      'relay_messages_buffered_total 0',
      'relay_buffer_messages 0',
      'relay_messages_dropped_total{reason="expired"} 0',
      'relay_auth_failures_total 1',
      'relay_errors_total{code="invalid_json"} 1',
      'relay_errors_total{code="auth_failed"} 1',
      '# TYPE relay_messages_routed_total counter',
    ]) {
      expect(text).toContain(line);
    }
    expect(h.relay.metrics).toMatchObject({ messagesRouted: 1, messagesDelivered: 1, joins: 2 });
  });

  it('answers unknown paths with 404 and other methods with 405', async () => {
    harness = await startRelayHarness();
    expect((await fetch(`${harness.statusUrl}/nope`)).status).toBe(404);
    expect((await fetch(`${harness.statusUrl}/health`, { method: 'POST' })).status).toBe(405);
  });

  it('answers a plain HTTP request on the WebSocket port with 426', async () => {
    harness = await startRelayHarness();
    const response = await fetch(harness.wsUrl.replace('ws:', 'http:'));
    expect(response.status).toBe(426);
  });
});

describe('room slots (contract 6, rule 10)', () => {
  it('picks the slot of a room as djb2(roomId) modulo the slot count', () => {
    expect(djb2('a')).toBe(177_670);
    expect(roomSlot('a', 16)).toBe(177_670 % 16);
    const room = '12.0123456789abcdef0123456789abcdef.fedcba9876543210fedcba9876543210';
    expect(roomSlot(room, 16)).toBe(djb2(room) % 16);
    expect(roomSlot(room, 7)).toBe(djb2(room) % 7);
  });

  it('keeps rooms of different slots apart and routes within each', async () => {
    harness = await startRelayHarness({ tuning: { shardCount: 4 } });
    const h = harness;
    const rooms = Array.from({ length: 12 }, () => h.room(1));
    expect(new Set(rooms.map((room) => roomSlot(room, 4))).size).toBeGreaterThan(1);
    const pairs = await Promise.all(
      rooms.map(async (room, i) => {
        const a = (await h.joined(room, 1, 100 + i)).client;
        const b = (await h.joined(room, 1, 200 + i)).client;
        return { a, b, i };
      }),
    );
    for (const { b, i } of pairs) b.send({ to: 'host', payload: { i } });
    for (const { a, i } of pairs) expect((await a.message()).payload).toEqual({ i });
    expect(h.relay.status().rooms).toBe(12);
  });
});
