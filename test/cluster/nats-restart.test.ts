import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  createRelayConnection,
  type RelayConnection,
  type WebSocketConstructor,
} from '../../client/relay-connection.ts';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason, startNatsCluster, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
/** NATS stays down this long each time (the length of the outage, not a wait for an event). */
const outage = () => new Promise((resolve) => setTimeout(resolve, 1_500));

/**
 * A sender on one node and a receiver on another, NATS stopped, killed or failing over while the
 * sender sends and flushes: every message a `flush()` confirmed must arrive.
 */
describe.skipIf(skip !== undefined)(
  `confirmed messages across a NATS restart${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const connections: RelayConnection[] = [];
    const disposals: Array<() => Promise<void>> = [];

    afterAll(async () => {
      for (const connection of connections) await connection.close().catch(() => undefined);
      await processes.dispose();
      for (const dispose of disposals) await dispose();
    });

    /** Device 2 receives on `nodes[1]` what device 1 sends on `nodes[0]`; `disrupt` meanwhile. */
    async function sendThrough(
      userId: number,
      nodes: RelayNode[],
      disrupt: (confirmedPast: (count: number) => Promise<void>) => Promise<void>,
    ): Promise<{ confirmed: number; lost: number[] }> {
      // a room id has a random part: made once
      const room = createRoomId(userId, clusterSecret);
      const connection = (node: RelayNode, device: number): RelayConnection => {
        const made = createRelayConnection({
          url: node.url,
          room,
          device,
          token: deviceToken(userId, device),
          WebSocket: WebSocket as unknown as WebSocketConstructor,
          backoff: { initialDelayMs: 100, maxDelayMs: 1_000 },
          pongTimeoutMs: 20_000,
        });
        connections.push(made);
        return made;
      };
      const receiver = connection(nodes[1]!, 2);
      const received = new Set<number>();
      receiver.on('message', (m) => received.add((m.payload as { i: number }).i));
      await receiver.connect();
      const sender = connection(nodes[0]!, 1);
      await sender.connect();

      const confirmed = new Set<number>();
      let next = 0;
      let sending = true;
      const loop = (async () => {
        while (sending) {
          const batch: number[] = [];
          for (let k = 0; k < 5 && sender.queued < 900; k++) {
            sender.send(2, { i: next });
            batch.push(next++);
          }
          try {
            await sender.flush();
            for (const i of batch) confirmed.add(i);
          } catch {
            // the socket was cut before the pong: these are sent again after the reconnect
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
      })();
      await disrupt(async (count) => {
        await eventually(() => confirmed.size >= count || undefined, `${count} confirmed`, 90_000);
      });
      sending = false;
      await loop;
      await eventually(
        () => [...confirmed].every((i) => received.has(i)) || undefined,
        'every confirmed message received',
        60_000,
      ).catch(() => undefined);
      return { confirmed: confirmed.size, lost: [...confirmed].filter((i) => !received.has(i)) };
    }

    it('loses no message that flush() confirmed when NATS is stopped and when it is killed', {
      timeout: 300_000,
    }, async () => {
      const nats = await startNatsServer();
      disposals.push(() => nats.dispose());
      const nodes = await processes.relayNodes(nats.url, 2);
      const { confirmed, lost } = await sendThrough(41, nodes, async (confirmedPast) => {
        await confirmedPast(100);
        await nats.stop();
        await outage();
        await nats.start();
        await confirmedPast(200);
        await nats.kill();
        await outage();
        await nats.start();
        await confirmedPast(300);
      });
      expect({ confirmed, lost }).toEqual({ confirmed, lost: [] });
    });

    it('loses no message that flush() confirmed when a server of a 3-server NATS cluster is killed', {
      timeout: 300_000,
    }, async () => {
      const cluster = await startNatsCluster(3);
      disposals.push(() => cluster.dispose());
      const nodes = await Promise.all([
        processes.relayNode(cluster.urls, 'failover-1'),
        processes.relayNode(cluster.urls, 'failover-2'),
      ]);
      const first = cluster.servers[0]!;
      const { confirmed, lost } = await sendThrough(42, nodes, async (confirmedPast) => {
        await confirmedPast(100);
        // both nodes are on the first server of their list: they move to another
        await first.kill();
        await confirmedPast(200);
        await first.start();
        await confirmedPast(300);
      });
      expect({ confirmed, lost }).toEqual({ confirmed, lost: [] });
    });
  },
);
