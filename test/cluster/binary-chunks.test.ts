import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbConfig } from '../../server/config/auth-config.ts';
import { createRoomId } from '../../server/tokens.ts';
import { dbTargets } from '../helpers/databases.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import { chunkCall, plainId } from '../helpers/store-client.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken } from './processes.ts';

/**
 * Chunks in binary frames in a cluster: a chunk put in a binary frame on one node is stored in
 * the shared store and fetched on another node, in a binary frame by a device that asks so and
 * in text by one that does not; a malformed binary frame closes with 1003 on any node.
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const skip = natsSkipReason() ?? postgres?.skip;
const userId = 32;
const room = createRoomId(userId, clusterSecret);
const token = (device: number) => deviceToken(userId, device);

describe.skipIf(skip !== undefined)(
  `chunks in binary frames across cluster nodes${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const extra: Record<string, string> = {};
    let database: { config: DbConfig; drop(): Promise<void> } | undefined;
    beforeAll(async () => {
      database = await postgres?.create('');
      if (database?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      const { user, host, port, database: name } = database.config;
      extra['store.url'] = `postgres://${user}@${host}:${port}/${name}`;
    });
    // Registered after the database's beforeAll: the nodes start with its URL.
    const cluster = useCluster(2, extra);
    afterAll(async () => {
      await database?.drop();
    });

    it('a chunk put in a binary frame on node A comes back on node B in the form asked for', {
      timeout: 60_000,
    }, async () => {
      const [nodeA, nodeB] = cluster.nodes;
      if (nodeA === undefined || nodeB === undefined) throw new Error('no nodes');
      const sender = cluster.client(nodeA);
      expect(await sender.join(room, 1, token(1))).toMatchObject({ type: 'joined' });
      const fetcher = cluster.client(nodeB);
      expect(await fetcher.join(room, 2, token(2))).toMatchObject({ type: 'joined' });

      const data = randomBytes(200 * 1024);
      const id = plainId(data);
      sender.sendBinary({ type: 'chunk-put', ref: 1, id }, data);
      expect(await sender.take((f) => f.ref === 1)).toEqual({ type: 'chunk-stored', ref: 1, id });

      const binary = await chunkCall(fetcher, { type: 'chunk-get', ref: 1, id, binary: true });
      expect(binary).toMatchObject({ type: 'chunk', ref: 1, id, binary: true });
      expect((binary.bytes as Buffer).equals(data)).toBe(true);
      const text = await chunkCall(fetcher, { type: 'chunk-get', ref: 2, id });
      expect(text.binary).toBeUndefined();
      expect(Buffer.from(text.data as string, 'base64').equals(data)).toBe(true);

      // Another binary frame closes with 1003 on a cluster node too; the others stay.
      const other = cluster.client(nodeB);
      expect(await other.join(room, 3, token(3))).toMatchObject({ type: 'joined' });
      other.sendBinary(Buffer.from('{"to":"host","payload":{}}'));
      expect((await other.waitClosed()).code).toBe(1003);
      expect(sender.closeInfo).toBeUndefined();
      expect(fetcher.closeInfo).toBeUndefined();
    });
  },
);
