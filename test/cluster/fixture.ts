import { afterAll, beforeAll } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { ClusterProcesses, type RelayNode } from './processes.ts';

/** A nats-server and relay nodes started for one test file, with the clients its tests open. */
export interface ClusterFixture {
  readonly nats: NatsServer;
  readonly nodes: RelayNode[];
  /** A client of `node`, terminated after the file. */
  client(node: RelayNode): RelayClient;
}

/** Starts (beforeAll) a nats-server and `count` relay nodes; stops everything after the file. */
export function useCluster(count: number, extra: Record<string, string | number>): ClusterFixture {
  const processes = new ClusterProcesses();
  const clients: RelayClient[] = [];
  const fixture = {
    nats: undefined as unknown as NatsServer,
    nodes: [] as RelayNode[],
    client(node: RelayNode) {
      const client = new RelayClient(node.url);
      clients.push(client);
      return client;
    },
  };
  beforeAll(
    async () => {
      fixture.nats = await startNatsServer();
      fixture.nodes = await processes.relayNodes(fixture.nats.url, count, extra);
    },
    30_000 + count * 30_000,
  );
  afterAll(async () => {
    for (const client of clients) client.terminate();
    await processes.dispose();
    await fixture.nats?.dispose();
  });
  return fixture;
}
