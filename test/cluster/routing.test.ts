import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { type Frame, RelayClient } from '../helpers/relay-client.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const userId = 7;
const room = createRoomId(userId, clusterSecret);
const token = (deviceId: number) => deviceToken(userId, deviceId);

describe.skipIf(skip !== undefined)(`cluster routing${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const processes = new ClusterProcesses();
  const clients: RelayClient[] = [];
  let nats: NatsServer | undefined;
  let nodes: RelayNode[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    const url = nats.url;
    nodes = await Promise.all([
      processes.relayNode(url, 'node-1'),
      processes.relayNode(url, 'node-2'),
      processes.relayNode(url, 'node-3'),
    ]);
  }, 90_000);

  afterAll(async () => {
    for (const client of clients) client.terminate();
    await processes.dispose();
    await nats?.dispose();
  });

  async function join(node: RelayNode, device: number): Promise<[RelayClient, Frame]> {
    const client = new RelayClient(node.url);
    clients.push(client);
    const joined = await client.join(room, device, token(device));
    return [client, joined];
  }

  it('reports the cluster on /health', async () => {
    const health = (await (await fetch(`${nodes[0]!.status}/health`)).json()) as {
      cluster?: { node: string; nats: string; nodes: number };
    };
    expect(health.cluster).toMatchObject({ node: 'node-1', nats: 'connected' });
  });

  it('routes host, direct and broadcast between nodes, in order, and replays on another node', {
    timeout: 60_000,
  }, async () => {
    const [a, joinedA] = await join(nodes[0]!, 1);
    expect(joinedA).toMatchObject({ type: 'joined', role: 'host', devices: [1] });
    const [b, joinedB] = await join(nodes[1]!, 2);
    expect(joinedB).toMatchObject({ type: 'joined', role: 'member', host: 1, devices: [1, 2] });
    expect(await a.next('presence')).toMatchObject({ device: 2, state: 'joined' });

    b.send({ to: 'host', payload: { n: 'to host' } });
    expect(await a.message()).toMatchObject({
      from: 2,
      to: 'host',
      room,
      payload: { n: 'to host' },
    });
    a.send({ to: 2, payload: { n: 'direct' } });
    expect(await b.message()).toMatchObject({ from: 1, to: 2, payload: { n: 'direct' } });
    a.send({ to: 'broadcast', payload: { n: 'all' } });
    expect(await b.message()).toMatchObject({ from: 1, to: 'broadcast', payload: { n: 'all' } });
    b.send({ to: 99, payload: {} });
    await b.error('unknown_target');

    for (let i = 0; i < 30; i++) b.send({ to: 'host', payload: { i } });
    for (let i = 0; i < 30; i++) expect((await a.message()).payload).toEqual({ i });

    // B drops from node 2 without leave; what is sent meanwhile waits in the room's stream.
    b.terminate();
    expect(await a.next('presence', 10_000)).toMatchObject({ device: 2, state: 'left' });
    for (let i = 0; i < 5; i++) a.send({ to: 2, payload: { missed: i } });
    a.send({ to: 'broadcast', payload: { missed: 5 } });
    await a.sync();
    const [again, rejoined] = await join(nodes[0]!, 2);
    expect(rejoined).toMatchObject({ type: 'joined', buffered: 6, gap: false, host: 1 });
    const replayed = [];
    for (let i = 0; i < 6; i++) replayed.push((await again.message()).payload);
    expect(replayed).toEqual([0, 1, 2, 3, 4, 5].map((missed) => ({ missed })));
    await again.sync();
    expect(again.unconsumedMessages()).toEqual([]);

    // The host leaves: the device on the other node becomes host and hears it.
    const [c] = await join(nodes[1]!, 3);
    await again.next('presence');
    a.send({ type: 'leave' });
    expect(await c.next('host', 10_000)).toMatchObject({ device: 2 });
    expect(await again.next('host', 10_000)).toMatchObject({ device: 2 });
  });

  it('keeps one order per sender for three senders on three nodes', {
    timeout: 60_000,
  }, async () => {
    const room3 = createRoomId(userId + 1, clusterSecret);
    const members: RelayClient[] = [];
    for (const [i, node] of nodes.entries()) {
      const client = new RelayClient(node.url);
      clients.push(client);
      const t = deviceToken(userId + 1, 20 + i);
      expect(await client.join(room3, 20 + i, t)).toMatchObject({ type: 'joined' });
      members.push(client);
    }
    const count = 40;
    for (let n = 0; n < count; n++) {
      for (const [i, client] of members.entries())
        client.send({ to: 'broadcast', payload: { s: i, n } });
    }
    for (const [i, receiver] of members.entries()) {
      const seen = new Map<number, number[]>();
      for (let k = 0; k < 2 * count; k++) {
        const { payload } = (await receiver.message(10_000)) as {
          payload: { s: number; n: number };
        };
        seen.set(payload.s, [...(seen.get(payload.s) ?? []), payload.n]);
      }
      expect(seen.has(i)).toBe(false);
      for (const ns of seen.values()) expect(ns).toEqual([...Array(count).keys()]);
    }
  });
});
