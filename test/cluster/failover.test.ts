import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import type { Frame, RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const rooms = new Map<number, string>();
/** The room of a user (a room id has a random part: made once per user). */
const roomOf = (userId: number): string => {
  const room = rooms.get(userId) ?? createRoomId(userId, clusterSecret);
  rooms.set(userId, room);
  return room;
};
const token = deviceToken;

describe.skipIf(skip !== undefined)(`cluster failover${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const cluster = useCluster(3, { 'buffer.seconds': 3, 'room.maxDevices': 3 });

  async function join(
    node: RelayNode,
    userId: number,
    device: number,
  ): Promise<[RelayClient, Frame]> {
    const client = cluster.client(node);
    const joined = await client.join(roomOf(userId), device, token(userId, device));
    return [client, joined];
  }

  it('replaces a connection on another node (4009) and counts room.maxDevices across nodes', async () => {
    const [a] = await join(cluster.nodes[0]!, 11, 1);
    const [old] = await join(cluster.nodes[1]!, 11, 2);
    await a.next('presence');
    const [fresh, joined] = await join(cluster.nodes[2]!, 11, 2);
    expect(joined).toMatchObject({ type: 'joined', role: 'member', devices: [1, 2] });
    expect((await old.waitClosed(5_000)).code).toBe(4009);
    a.send({ to: 2, payload: { after: 'replacement' } });
    expect((await fresh.message()).payload).toEqual({ after: 'replacement' });
    await a.sync();
    expect(a.frames.filter((f) => f.type === 'presence')).toHaveLength(1);

    await join(cluster.nodes[1]!, 11, 3);
    const [refused, answer] = await join(cluster.nodes[0]!, 11, 4);
    expect(answer).toMatchObject({ type: 'error', code: 'room_full' });
    refused.terminate();
  });

  it('reports gap after the window on another node', { timeout: 30_000 }, async () => {
    const [a] = await join(cluster.nodes[0]!, 12, 1);
    const [b] = await join(cluster.nodes[1]!, 12, 2);
    await a.next('presence');
    b.terminate();
    await a.next('presence', 10_000);
    a.send({ to: 2, payload: { lost: true } });
    await a.sync();
    const droppedAt = Date.now();
    await eventually(
      () => (Date.now() > droppedAt + 3_500 ? true : undefined),
      'the window',
      10_000,
    );
    const [, joined] = await join(cluster.nodes[2]!, 12, 2);
    expect(joined).toMatchObject({ type: 'joined', buffered: 0, gap: true });
  });

  it('hands the host over within 15 s to exactly one device when the host node is killed', {
    timeout: 60_000,
  }, async () => {
    const [, hostJoined] = await join(cluster.nodes[2]!, 13, 1);
    expect(hostJoined).toMatchObject({ role: 'host' });
    const [b] = await join(cluster.nodes[0]!, 13, 2);
    const [c] = await join(cluster.nodes[1]!, 13, 3);
    await b.next('presence');
    const killedAt = Date.now();
    await cluster.nodes[2]!.process.stop('SIGKILL');
    const hostB = await b.next('host', 15_000);
    const hostC = await c.next('host', 15_000);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect(hostB).toMatchObject({ device: 2 });
    expect(hostC).toMatchObject({ device: 2 });
    expect(await b.next('presence')).toMatchObject({ device: 1, state: 'left' });
    c.send({ to: 'host', payload: { to: 'new host' } });
    expect((await b.message()).payload).toEqual({ to: 'new host' });
  });

  it('keeps local traffic and refuses joins with 1013 while NATS is down, and recovers by itself', {
    timeout: 60_000,
  }, async () => {
    const [a] = await join(cluster.nodes[0]!, 14, 1);
    const [b] = await join(cluster.nodes[0]!, 14, 2);
    await a.next('presence');
    await cluster.nats.stop();
    await eventually(
      async () => {
        const health = (await (await fetch(`${cluster.nodes[0]!.status}/health`)).json()) as {
          cluster: { nats: string };
        };
        return health.cluster.nats === 'disconnected' ? true : undefined;
      },
      'node 1 to notice',
      15_000,
    );
    b.send({ to: 1, payload: { local: true } });
    expect((await a.message()).payload).toEqual({ local: true });
    const refused = cluster.client(cluster.nodes[0]!);
    await refused.opened;
    refused.send({
      type: 'join',
      room: roomOf(14),
      device: 3,
      token: token(14, 3),
    });
    expect((await refused.waitClosed(5_000)).code).toBe(1013);

    await cluster.nats.start();
    await eventually(
      async () => {
        const probe = cluster.client(cluster.nodes[1]!);
        const answer = await probe.join(roomOf(14), 4, token(14, 4)).catch(() => undefined);
        probe.terminate();
        return answer?.type === 'joined' ? true : undefined;
      },
      'joins again',
      30_000,
    );
  });
});
