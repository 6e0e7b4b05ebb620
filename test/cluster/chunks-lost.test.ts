import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbConfig } from '../../server/config/auth-config.ts';
import { createRoomId } from '../../server/tokens.ts';
import { dbTargets } from '../helpers/databases.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import type { Frame, RelayClient } from '../helpers/relay-client.ts';
import { chunkCall, plainId, putChunk, sealedId, testKey } from '../helpers/store-client.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken } from './processes.ts';

/**
 * `chunks-lost` in a cluster: a device on one relay node reports a damaged chunk, the host drops
 * it, and the room's devices present on every node hear of it at once, as on a single node; a
 * device absent at that moment is not told when it comes back (nothing is kept for it).
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const skip = natsSkipReason() ?? postgres?.skip;
const userId = 31;
const room = createRoomId(userId, clusterSecret);
const token = (device: number) => deviceToken(userId, device);

const lostFrames = (client: RelayClient): Frame[] =>
  client.frames.filter((f) => f.type === 'chunks-lost');

describe.skipIf(skip !== undefined)(
  `chunks-lost across cluster nodes${skip ? ` (skipped: ${skip})` : ''}`,
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

    /** Flips one byte of a chunk's row in the shared store, as disk rot would. */
    async function damage(id: string): Promise<void> {
      if (database?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      const { user, host, port, database: name } = database.config;
      const client = new pg.Client({ user, host, port, database: name });
      await client.connect();
      try {
        const done = await client.query(
          'UPDATE store_chunks SET data = set_byte(data, 0, get_byte(data, 0) # 255) WHERE room = $1 AND id = $2',
          [room, id],
        );
        expect(done.rowCount).toBe(1);
      } finally {
        await client.end();
      }
    }

    it('a chunk dropped on a report on node A is told to the devices on node B, not to one absent then', {
      timeout: 60_000,
    }, async () => {
      const [nodeA, nodeB] = cluster.nodes;
      if (nodeA === undefined || nodeB === undefined) throw new Error('no nodes');
      const reporter = cluster.client(nodeA);
      expect(await reporter.join(room, 1, token(1))).toMatchObject({ type: 'joined' });
      const holder = cluster.client(nodeB);
      expect(await holder.join(room, 2, token(2))).toMatchObject({ type: 'joined' });
      const away = cluster.client(nodeB);
      expect(await away.join(room, 3, token(3))).toMatchObject({ type: 'joined' });
      // The third device drops without leave: absent, kept for, while the chunks are dropped.
      away.terminate();
      await holder.take((f) => f.type === 'presence' && f.device === 3 && f.state === 'left');

      const rotten = randomBytes(6000);
      expect(await putChunk(holder, 1, rotten)).toMatchObject({ type: 'chunk-stored' });
      const key = testKey('cluster lost');
      const id = sealedId('cluster lost');
      const sealed = randomBytes(800);
      expect(await putChunk(holder, 2, sealed, { id, ...key })).toMatchObject({
        type: 'chunk-stored',
      });
      await damage(plainId(rotten));

      expect(
        await chunkCall(reporter, { type: 'chunk-bad', ref: 1, ids: [plainId(rotten)] }),
      ).toEqual({ type: 'chunk-dropped', ref: 1, ids: [plainId(rotten)] });
      const plainLost = { type: 'chunks-lost', ids: [plainId(rotten)] };
      expect(await reporter.take((f) => f.type === 'chunks-lost')).toEqual(plainLost);
      expect(await holder.take((f) => f.type === 'chunks-lost')).toEqual(plainLost);

      // A sealed chunk, on the key's proof: the notice carries its kc to the other node too.
      expect(await chunkCall(reporter, { type: 'chunk-bad', ref: 2, ids: [id], ...key })).toEqual({
        type: 'chunk-dropped',
        ref: 2,
        ids: [id],
      });
      const sealedLost = { type: 'chunks-lost', ids: [id], kc: key.kc };
      expect(await holder.take((f) => f.type === 'chunks-lost')).toEqual(sealedLost);
      expect(await reporter.take((f) => f.type === 'chunks-lost')).toEqual(sealedLost);

      // Put again by the device that has it, on its own node: the reporter gets it intact.
      expect(await putChunk(holder, 3, rotten)).toMatchObject({ type: 'chunk-stored' });
      const got = await chunkCall(reporter, { type: 'chunk-get', ref: 3, id: plainId(rotten) });
      expect(Buffer.from(got.data as string, 'base64').equals(rotten)).toBe(true);

      // Back on node B: what the room's stream kept for it replays no notice.
      const back = cluster.client(nodeB);
      expect(await back.join(room, 3, token(3))).toMatchObject({
        type: 'joined',
        buffered: 0,
        gap: false,
      });
      await back.sync();
      expect(lostFrames(back)).toEqual([]);
      // Each present device heard of each drop once.
      await holder.sync();
      await reporter.sync();
      expect(lostFrames(holder)).toEqual([plainLost, sealedLost]);
      expect(lostFrames(reporter)).toEqual([plainLost, sealedLost]);
    });
  },
);
