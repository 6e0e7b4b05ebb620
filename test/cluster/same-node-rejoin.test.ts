import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { metricAt } from '../helpers/metrics.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const userId = 71;
const room = createRoomId(userId, clusterSecret);

describe.skipIf(skip !== undefined)(
  `cluster: a device joining again on the node that still holds its connection${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer;
    let proxy: TcpProxy;
    let nodes: RelayNode[];

    beforeAll(async () => {
      nats = await startNatsServer();
      // the second node reaches NATS through a proxy the test can hold
      proxy = await startTcpProxy('127.0.0.1', Number(new URL(nats.url).port));
      nodes = [
        await processes.relayNode(nats.url, 'node-1', { 'buffer.seconds': 60 }),
        await processes.relayNode(`nats://127.0.0.1:${proxy.port}`, 'node-2', {
          'buffer.seconds': 60,
        }),
      ];
    }, 120_000);

    afterAll(async () => {
      for (const client of clients) client.terminate();
      proxy?.thaw();
      await processes.dispose();
      await proxy?.close();
      await nats?.dispose();
    });

    const client = (node: RelayNode) => {
      const made = new RelayClient(node.url);
      clients.push(made);
      return made;
    };
    const tags = (c: RelayClient) =>
      c.allMessages().map((m) => (m.payload as { tag?: string } | undefined)?.tag);

    it('gets what reached the node from the room stream while it joined, once (gap false)', {
      timeout: 90_000,
    }, async () => {
      const [one, two] = nodes as [RelayNode, RelayNode];
      const sender = client(one);
      expect(await sender.join(room, 1, deviceToken(userId, 1))).toMatchObject({ type: 'joined' });
      const older = client(two);
      expect(await older.join(room, 2, deviceToken(userId, 2))).toMatchObject({ type: 'joined' });
      await sender.take((f) => f.type === 'presence' && f.device === 2 && f.state === 'joined');
      sender.send({ to: 2, payload: { tag: 'before' } });
      await sender.sync();
      await older.take((f) => (f.payload as { tag?: string } | undefined)?.tag === 'before');

      // node-2 hears nothing from NATS for a moment: the next message is in the room's stream
      // (confirmed to its sender) and reaches node-2 only after the device's new join began there
      proxy.freeze();
      const joinsBefore = await metricAt(two.status, 'relay_joins_total');
      sender.send({ to: 2, payload: { tag: 'during' } });
      await sender.sync();
      const newer = client(two);
      const joined = newer.join(room, 2, deviceToken(userId, 2), 30_000);
      await eventually(
        async () => (await metricAt(two.status, 'relay_joins_total')) > joinsBefore,
        'the new join taken by node-2',
        20_000,
      );
      proxy.thaw();

      expect(await joined).toMatchObject({ type: 'joined', gap: false });
      await newer.take(
        (f) => (f.payload as { tag?: string } | undefined)?.tag === 'during',
        15_000,
      );
      sender.send({ to: 2, payload: { tag: 'after' } });
      await sender.sync();
      await newer.take((f) => (f.payload as { tag?: string } | undefined)?.tag === 'after', 15_000);
      // once, in order, and never to the replaced connection
      expect(tags(newer)).toEqual(['during', 'after']);
      expect(tags(older)).toEqual(['before']);
    });
  },
);
