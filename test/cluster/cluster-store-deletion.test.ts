import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { dbTargets } from '../helpers/databases.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { append, putChunk } from '../helpers/store-client.ts';
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

    it('removes the documents, chunks and folder reports of a deleted project within a sweep, and keeps the others', {
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
        const chunk = Buffer.from(`a file of ${project.name}`);
        expect(await putChunk(client, 2, chunk)).toMatchObject({ type: 'chunk-stored' });
        const report = { type: 'folder-report', doc: 'f', files: 1, bytes: chunk.length };
        client.send({ ...report, encrypted: false, names: ['a.bin'] });
        await client.sync();
      }
      const query = async <R extends object>(text: string): Promise<R[]> => {
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        try {
          return (await admin.query<R>(text)).rows;
        } finally {
          await admin.end();
        }
      };
      // Documents, chunks and folder reports: the rooms that have any, and how many rows in all.
      const tables = ['store_documents', 'store_chunks', 'store_folder_reports'];
      const rooms = async () => {
        const union = tables.map((table) => `SELECT room FROM ${table}`).join(' UNION ');
        const found = await query<{ room: string }>(`${union} ORDER BY room`);
        return found.map((row) => row.room);
      };
      const counts = async () => {
        const each = tables.map((table) => `(SELECT count(*)::int FROM ${table})`).join(' + ');
        return (await query<{ n: number }>(`SELECT ${each} AS n`))[0]?.n;
      };
      // A folder report is stored after the frames that follow it are answered: waited for.
      await eventually(
        async () => ((await counts()) === 6 ? true : undefined),
        'two documents, two chunks and two folder reports stored',
        10_000,
      );
      expect(await rooms()).toEqual([gone.roomId, kept.roomId].sort());
      await owner.deleteProject(gone.id);
      await eventually(
        async () => ((await rooms()).length === 1 ? true : undefined),
        'the deleted project’s documents, chunks and folder reports removed',
        70_000,
      );
      expect(await rooms()).toEqual([kept.roomId]);
      expect(await counts()).toBe(3);
    });
  },
);
