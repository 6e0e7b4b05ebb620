import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { type NatsCluster, natsSkipReason, startNatsCluster } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const userId = 51;
const room = createRoomId(userId, clusterSecret);

describe.skipIf(skip !== undefined)(
  `cluster on a 3-server NATS cluster${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsCluster;
    let nodes: RelayNode[] = [];

    beforeAll(async () => {
      nats = await startNatsCluster(3);
      const urls = nats.servers.map((server) => server.url);
      // each relay node on its own NATS server first (the list is tried in order)
      nodes = await Promise.all(
        urls.map((_, i) =>
          processes.relayNode([...urls.slice(i), ...urls.slice(0, i)].join(','), `node-${i + 1}`, {
            'buffer.seconds': 60,
          }),
        ),
      );
    }, 150_000);

    afterAll(async () => {
      // CLUSTER_LOG_LEVEL=info: the relay nodes' logs after the file
      if (process.env.CLUSTER_LOG_LEVEL)
        for (const [i, node] of nodes.entries())
          console.log(
            `--- node-${i + 1}\n${[...node.process.stdout, ...node.process.stderr].join('\n')}`,
          );
      for (const client of clients) client.terminate();
      await processes.dispose();
      await nats?.dispose();
    });

    /** Joins `device` on `node`, again while the node is not ready (closed 1013). */
    function join(node: RelayNode, device: number): Promise<RelayClient> {
      return eventually(
        async () => {
          const client = new RelayClient(node.url);
          clients.push(client);
          const answer = await client
            .join(room, device, deviceToken(userId, device))
            .catch(() => {});
          if (answer?.type === 'joined') return client;
          client.terminate();
          return undefined;
        },
        `device ${device} joined`,
        30_000,
      );
    }

    // Not reliable yet: after the kill, routing between all three nodes does not always come back
    // within 60 s (one node's room stream consumer seems to stall while the stream's leader
    // moves); see "Limits of this version" in docs/cluster.md. Run it by hand with `.skip` off.
    it.skip('keeps routing and replaying when the NATS server of one relay node is killed (skipped: routing between all three nodes does not always come back within 60 s; issue 15)', {
      timeout: 120_000,
    }, async () => {
      const a = await join(nodes[0]!, 1);
      const b = await join(nodes[1]!, 2);
      const c = await join(nodes[2]!, 3);
      await a.next('presence');
      await a.next('presence');
      a.send({ to: 2, payload: { before: true } });
      expect((await b.message()).payload).toEqual({ before: true });

      // node-1's server goes: node-1 moves to the next server of its list
      await nats.servers[0]!.kill();
      let probe = 0;
      let streak = 0;
      await eventually(
        async () => {
          probe++;
          a.send({ to: 'broadcast', payload: { probe } });
          b.send({ to: 1, payload: { probe } });
          c.send({ to: 1, payload: { probe } });
          const got = await Promise.all(
            [b, c, a, a].map((client) => client.message(1_500).catch(() => undefined)),
          );
          // five answered probes in a row: NATS has its new leaders
          streak = got.every((m) => m !== undefined) ? streak + 1 : 0;
          return streak >= 5 ? true : undefined;
        },
        'routing between the three nodes again',
        60_000,
      );
      // from now on, every message once and in order, both ways
      for (let i = 0; i < 50; i++) a.send({ to: 'broadcast', payload: { i } });
      for (const receiver of [b, c]) {
        const seen: number[] = [];
        while (seen.length < 50) {
          const { payload } = (await receiver.message(10_000)) as { payload: { i?: number } };
          if (payload.i !== undefined) seen.push(payload.i);
        }
        expect(seen).toEqual([...Array(50).keys()]);
      }

      // b drops from node-2 and comes back on node-1: it gets what it missed, once, in order
      b.terminate();
      await a.take((f) => f.type === 'presence' && f.device === 2 && f.state === 'left', 15_000);
      for (let i = 0; i < 5; i++) c.send({ to: 2, payload: { missed: i } });
      await c.sync();
      const again = new RelayClient(nodes[0]!.url);
      clients.push(again);
      const rejoined = await again.join(room, 2, deviceToken(userId, 2));
      // (not through `join`: its replay is what is checked)
      expect(rejoined).toMatchObject({ type: 'joined', buffered: 5, gap: false });
      const replayed = [];
      for (let i = 0; i < 5; i++) replayed.push((await again.message()).payload);
      expect(replayed).toEqual([0, 1, 2, 3, 4].map((missed) => ({ missed })));
    });
  },
);
