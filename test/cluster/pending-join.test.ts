import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import type { RelayClient } from '../helpers/relay-client.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken } from './processes.ts';

const skip = natsSkipReason();
const userId = 61;
const room = createRoomId(userId, clusterSecret);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(skip !== undefined)(
  `cluster: messages routed on a node while a device's join there is registered${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    // the sender is not slowed down by the rate limit: it sends every millisecond
    const cluster = useCluster(1, {
      'buffer.seconds': 60,
      'rate.perSecond': 5000,
      'rate.burst': 5000,
    });

    /** The `i` of every routed message `client` got, replayed or live, in arrival order. */
    const numbers = (client: RelayClient) =>
      client.allMessages().map((m) => (m.payload as { i: number }).i);

    it('reach the device once and in order, broadcast or direct, when it rejoins on the same node', {
      timeout: 120_000,
    }, async () => {
      const [node] = cluster.nodes as [(typeof cluster.nodes)[0]];
      const sender = cluster.client(node);
      expect(await sender.join(room, 1, deviceToken(userId, 1))).toMatchObject({ type: 'joined' });
      let receiver = cluster.client(node);
      expect(await receiver.join(room, 2, deviceToken(userId, 2))).toMatchObject({
        type: 'joined',
      });
      let next = 0;
      for (let cycle = 0; cycle < 12; cycle++) {
        // the receiver drops (no leave: kept for) with nothing in flight to it
        receiver.terminate();
        await sender.take(
          (f) => f.type === 'presence' && f.device === 2 && f.state === 'left',
          15_000,
        );
        // the sender keeps sending, every millisecond, while the receiver joins again
        let sending = true;
        const first = next;
        const flow = (async () => {
          while (sending) {
            const i = next++;
            sender.send({ to: i % 2 === 0 ? 'broadcast' : 2, payload: { i } });
            await pause(1);
          }
        })();
        await pause(20);
        receiver = cluster.client(node);
        const joined = await receiver.join(room, 2, deviceToken(userId, 2));
        expect(joined).toMatchObject({ type: 'joined', gap: false });
        await pause(30);
        sending = false;
        await flow;
        await sender.sync();
        const last = next - 1;
        await receiver.take((f) => (f.payload as { i?: number } | undefined)?.i === last, 15_000);
        // everything since the drop, once and in order: replayed first, then live
        expect(numbers(receiver)).toEqual(
          Array.from({ length: next - first }, (_, k) => first + k),
        );
      }
    });
  },
);
