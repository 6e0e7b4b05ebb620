import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  createRelayConnection,
  type RelayConnection,
  type WebSocketConstructor,
} from '../../client/relay-connection.ts';
import { createRoomId } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
/** NATS stays down this long each time (the length of the outage, not a wait for an event). */
const outage = () => new Promise((resolve) => setTimeout(resolve, 1_500));

/**
 * A sender on one node and a receiver on another, NATS stopped (SIGTERM) and killed (SIGKILL)
 * while the sender sends and flushes: every message a `flush()` confirmed must arrive.
 */
describe.skipIf(skip !== undefined)(
  `confirmed messages across a NATS restart${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    // a room id has a random part: made once
    const room = createRoomId(41, clusterSecret);
    const connections: RelayConnection[] = [];
    let nats: NatsServer;
    let nodes: RelayNode[];

    beforeAll(async () => {
      nats = await startNatsServer();
      nodes = await processes.relayNodes(nats.url, 2);
    }, 120_000);

    afterAll(async () => {
      for (const connection of connections) await connection.close().catch(() => undefined);
      await processes.dispose();
      await nats?.dispose();
    });

    function connection(node: RelayNode, device: number): RelayConnection {
      const made = createRelayConnection({
        url: node.url,
        room,
        device,
        token: deviceToken(41, device),
        WebSocket: WebSocket as unknown as WebSocketConstructor,
        backoff: { initialDelayMs: 100, maxDelayMs: 1_000 },
        pongTimeoutMs: 20_000,
      });
      connections.push(made);
      return made;
    }

    it('loses no message that flush() confirmed when NATS is stopped and when it is killed', {
      timeout: 240_000,
    }, async () => {
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
      const confirmedPast = (count: number) =>
        eventually(() => confirmed.size >= count || undefined, `${count} confirmed`, 90_000);

      await confirmedPast(100);
      await nats.stop();
      await outage();
      await nats.start();
      await confirmedPast(confirmed.size + 100);
      await nats.kill();
      await outage();
      await nats.start();
      await confirmedPast(confirmed.size + 100);
      sending = false;
      await loop;

      await eventually(
        () => [...confirmed].every((i) => received.has(i)) || undefined,
        'every confirmed message received',
        60_000,
      ).catch(() => undefined);
      const lost = [...confirmed].filter((i) => !received.has(i));
      expect({ confirmed: confirmed.size, lost }).toEqual({ confirmed: confirmed.size, lost: [] });
    });
  },
);
