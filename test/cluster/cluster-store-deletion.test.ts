import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { dbTargets } from '../helpers/databases.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { append } from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses } from './processes.ts';

/**
 * A cluster node's document store forgets the documents of a deleted project: the node asks the
 * auth processes over NATS which rooms still have a project, at its sweep (every 30 s).
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const skip = natsSkipReason() ?? postgres?.skip;

describe.skipIf(skip !== undefined)(
  `deleted projects in the cluster store${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer | undefined;
    let drop: (() => Promise<void>) | undefined;
    afterAll(async () => {
      for (const client of clients) client.terminate();
      await processes.dispose();
      await nats?.dispose();
      await drop?.();
    });

    it('removes the documents of a deleted project within a sweep, and keeps the others', {
      timeout: 120_000,
    }, async () => {
      const database = await postgres?.create('');
      if (database?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      drop = database.drop;
      const { user, host, port, database: name } = database.config;
      const url = `postgres://${user}@${host}:${port}/${name}`;
      nats = await startNatsServer();
      const [auth, node] = await Promise.all([
        processes.authProcess(nats.url),
        processes.relayNode(nats.url, 'node-a', { 'store.url': url }),
      ]);
      const device = await auth.signIn('owner@example.org', 'laptop');
      const owner = createAuthClient({ authUrl: auth.url, deviceToken: device.deviceToken });
      const gone = (await owner.registerProject('gone-key', 'Gone')).project;
      const kept = (await owner.registerProject('kept-key', 'Kept')).project;
      for (const project of [gone, kept]) {
        const client = new RelayClient(node.url);
        clients.push(client);
        await client.join(project.roomId, device.device.id, device.deviceToken);
        expect(await append(client, 'notes.md', 1, 'text')).toMatchObject({ type: 'appended' });
      }
      const rooms = async () => {
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        try {
          const found = await admin.query<{ room: string }>(
            'SELECT room FROM store_documents ORDER BY room',
          );
          return found.rows.map((row) => row.room);
        } finally {
          await admin.end();
        }
      };
      expect(await rooms()).toEqual([gone.roomId, kept.roomId].sort());
      await owner.deleteProject(gone.id);
      await eventually(
        async () => ((await rooms()).length === 1 ? true : undefined),
        'the deleted project’s documents removed',
        70_000,
      );
      expect(await rooms()).toEqual([kept.roomId]);
    });
  },
);
