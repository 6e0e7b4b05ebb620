import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { readRange, streamBounds } from '../../server/cluster/room-stream.ts';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import type { Frame, RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const count = 300;

interface Numbered {
  k: string;
  i: number;
}

/** The numbers of sequence `k` among routed frames, in the order they came. */
const numbers = (frames: Frame[], k: string): number[] =>
  frames.map((f) => f.payload as Numbered).flatMap((p) => (p.k === k ? [p.i] : []));
const upTo = (n: number): number[] => [...Array(n).keys()];

/**
 * Sends `count` numbered messages of sequence `k` to each of `to`, 10 at a time, calling `midway`
 * after half of them. Each carries the client library's envelope (session `k`, counter `i`), so
 * a re-send has the same JetStream message id; a ping follows every 10 (its pong confirms them).
 * Sends to a closed socket are dropped.
 */
async function sendSequence(
  client: RelayClient,
  to: number[],
  k: string,
  midway?: () => void,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (i === count / 2) midway?.();
    for (const device of to) {
      if (client.socket.readyState !== client.socket.OPEN) return;
      client.send({ to: device, payload: { _sync: { s: `${k}${device}`, n: i }, k, i } });
    }
    if (i % 10 === 9) {
      client.send({ type: 'ping' });
      await sleep(5);
    }
  }
}

/**
 * Sequence `a` from the first client and `b` from the second, side by side; `victim` is killed
 * (-9) when the second is halfway. Resolves once the second client's messages were all handled.
 */
async function sendAndKill(
  [first, second]: [RelayClient, RelayClient],
  to: number[],
  victim: RelayNode,
): Promise<void> {
  let killed: Promise<unknown> | undefined;
  await Promise.all([
    sendSequence(first, to, 'a'),
    sendSequence(second, to, 'b', () => {
      killed = victim.process.stop('SIGKILL');
    }),
  ]);
  await killed;
  await second.sync();
}

describe.skipIf(skip !== undefined)(`cluster kill -9${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const cluster = useCluster(4, {
    'buffer.seconds': 60,
    'rate.perSecond': 100_000,
    'rate.burst': 100_000,
  });

  async function join(node: RelayNode, room: string, user: number, device: number) {
    const client = cluster.client(node);
    const joined = await client.join(room, device, deviceToken(user, device));
    expect(joined).toMatchObject({ type: 'joined' });
    return { client, joined };
  }

  it("kill -9 of a sender's node: the receiver gets every frame the stream took, once, in order; the re-send fills the rest", {
    timeout: 120_000,
  }, async () => {
    const room = createRoomId(41, clusterSecret);
    const { client: receiver } = await join(cluster.nodes[2]!, room, 41, 1);
    const { client: a } = await join(cluster.nodes[0]!, room, 41, 2);
    const { client: b } = await join(cluster.nodes[1]!, room, 41, 3);
    await receiver.next('presence');
    await receiver.next('presence');

    await sendAndKill([a, b], [1], cluster.nodes[0]!);

    // What node 1 published before it died is in the room's stream.
    const nc = await connect({ servers: cluster.nats.url });
    const bounds = await streamBounds(await jetstreamManager(nc), room);
    const stored = await readRange(jetstream(nc), room, 0, bounds.last);
    await nc.close();
    const acknowledged = stored
      .map((f) => JSON.parse(f.frame.toString('utf8')) as Frame)
      .filter((f) => f.from === 2);
    const published = numbers(acknowledged, 'a');
    expect(published).toEqual(upTo(published.length));
    // A pong confirms the messages before its ping: they are all in the stream.
    const confirmed = 10 * a.frames.filter((f) => f.type === 'pong').length;
    expect(published.length).toBeGreaterThanOrEqual(confirmed);

    await eventually(
      () => numbers(receiver.allMessages(), 'b').length === count || undefined,
      'every message of the sender on the surviving node',
      30_000,
    );
    await eventually(
      () => numbers(receiver.allMessages(), 'a').length >= published.length || undefined,
      'what the killed node published',
      30_000,
    );
    await receiver.sync();
    expect(numbers(receiver.allMessages(), 'b')).toEqual(upTo(count));
    expect(numbers(receiver.allMessages(), 'a')).toEqual(published);

    // The sender comes back on another node and sends everything again: NATS drops what it had.
    const { client: again } = await join(cluster.nodes[1]!, room, 41, 2);
    await sendSequence(again, [1], 'a');
    await again.sync();
    await eventually(
      () => numbers(receiver.allMessages(), 'a').length >= count || undefined,
      'the re-sent rest',
      30_000,
    );
    await sleep(500);
    await receiver.sync();
    expect(numbers(receiver.allMessages(), 'a')).toEqual(upTo(count));
  });

  it("kill -9 of the receiver's node: back on another node at once or after it was declared dead, nothing that reached the stream is lost", {
    timeout: 120_000,
  }, async () => {
    const room = createRoomId(42, clusterSecret);
    const { client: quick } = await join(cluster.nodes[1]!, room, 42, 1);
    const { client: late } = await join(cluster.nodes[1]!, room, 42, 2);
    const { client: near } = await join(cluster.nodes[1]!, room, 42, 3);
    const { client: far } = await join(cluster.nodes[2]!, room, 42, 4);
    for (let i = 0; i < 3; i++) await quick.next('presence');

    await sendAndKill([near, far], [1, 2], cluster.nodes[1]!);

    // The quick receiver is back on node 4 before anyone noticed node 2 died.
    const { client: quickAgain, joined: quickJoined } = await join(cluster.nodes[3]!, room, 42, 1);
    // The late one comes back once node 2 was declared dead (its devices left).
    await far.take((f) => f.type === 'presence' && f.device === 2 && f.state === 'left', 30_000);
    const { client: lateAgain, joined: lateJoined } = await join(cluster.nodes[3]!, room, 42, 2);

    for (const [before, after, joined] of [
      [quick, quickAgain, quickJoined],
      [late, lateAgain, lateJoined],
    ] as const) {
      expect(joined).toMatchObject({ gap: true });
      await eventually(
        () =>
          Math.max(-1, ...numbers(after.allMessages(), 'b')) === count - 1 ||
          (Math.max(-1, ...numbers(before.allMessages(), 'b')) === count - 1 &&
            after.allMessages().length >= (joined.buffered as number)) ||
          undefined,
        'the rest of the surviving sender',
        30_000,
      );
      await after.sync();
      const first = numbers(before.allMessages(), 'b');
      const second = numbers(after.allMessages(), 'b');
      expect(first).toEqual(upTo(first.length));
      // No loss: the second connection goes on from at most where the first stopped, in order,
      // each once; what it has again is at most what the dead node handed over last.
      expect(second).toEqual(second.length === 0 ? [] : upTo(count).slice(second[0]));
      expect(second[0] ?? count).toBeLessThanOrEqual(first.length);
      // Every message was in the stream before the join (the sender's pong confirmed it), so
      // `buffered` counts exactly what the second connection got.
      expect(joined.buffered).toBeGreaterThan(0);
      expect(joined.buffered).toBe(after.allMessages().length);
      // The sender on the killed node delivered directly: what arrived came once and in order.
      const direct = numbers(before.allMessages(), 'a');
      expect(direct).toEqual(upTo(direct.length));
      expect(numbers(after.allMessages(), 'a')).toEqual([]);
    }
  });
});
