import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import { tcpOf } from '../helpers/relay-client.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken } from './processes.ts';

const skip = natsSkipReason();
const userId = 63;
const room = createRoomId(userId, clusterSecret);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(skip !== undefined)(
  `cluster: a receiver whose socket is closing${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const cluster = useCluster(2, { 'buffer.seconds': 60 });

    it('gets, at its next join, what reached its node from another node while it was closing', {
      timeout: 90_000,
    }, async () => {
      const [nodeA, nodeB] = cluster.nodes as [
        (typeof cluster.nodes)[0],
        (typeof cluster.nodes)[0],
      ];
      const sender = cluster.client(nodeA);
      expect(await sender.join(room, 1, deviceToken(userId, 1))).toMatchObject({ type: 'joined' });
      const receiver = cluster.client(nodeB);
      expect(await receiver.join(room, 2, deviceToken(userId, 2))).toMatchObject({
        type: 'joined',
      });
      await sender.take((f) => f.type === 'presence' && f.device === 2 && f.state === 'joined');
      sender.send({ to: 2, payload: { i: 0 } });
      expect((await receiver.message()).payload).toEqual({ i: 0 });

      // Its close frame reaches node B, but it never reads B's answer nor closes its TCP side:
      // B holds the socket as closing while frames for it come through the room's stream.
      tcpOf(receiver).pause();
      receiver.socket.close();
      await pause(500);
      sender.send({ to: 2, payload: { i: 1 } });
      sender.send({ to: 'broadcast', payload: { i: 2 } });
      await sender.sync();
      await pause(1_000);
      receiver.terminate();
      await sender.take(
        (f) => f.type === 'presence' && f.device === 2 && f.state === 'left',
        15_000,
      );

      const back = cluster.client(nodeB);
      const joined = await back.join(room, 2, deviceToken(userId, 2), 20_000);
      expect(joined).toMatchObject({ type: 'joined', gap: false });
      const replayed = [];
      for (let n = 0; n < (joined.buffered as number); n++) {
        replayed.push((await back.message()).payload);
      }
      expect(replayed).toEqual([{ i: 1 }, { i: 2 }]);
    });
  },
);
