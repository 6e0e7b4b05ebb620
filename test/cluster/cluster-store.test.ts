import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { dbTargets } from '../helpers/databases.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import { freePort } from '../helpers/ports.ts';
import type { Frame } from '../helpers/relay-client.ts';
import {
  append,
  b64,
  catchUp,
  chunkCall,
  entryText,
  plainId,
  putChunk,
  sealedId,
  testKey,
} from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';
import { useCluster } from './fixture.ts';
import { ClusterProcesses, clusterSecret, deviceToken } from './processes.ts';

/**
 * The cluster store: two relay nodes on one NATS share one PostgreSQL database (`store.url`), so
 * a device catches up on either node from what another device appended on the other, with no
 * other device online; and an append a node acknowledged survives that node's `kill -9`.
 */

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const skip = natsSkipReason() ?? postgres?.skip;
const userId = 12;
const room = createRoomId(userId, clusterSecret);
/** Given in the URL (PostgreSQL here trusts loopback): it must appear in no log line. */
const password = 'store-password-never-logged-4711';

describe.skipIf(skip !== undefined)(
  `the document store shared by cluster nodes${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const extra: Record<string, string> = {};
    let drop: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      const database = await postgres?.create('');
      if (database?.config.driver !== 'postgres') throw new Error('no PostgreSQL database');
      const { user, host, port, database: name } = database.config;
      extra['store.url'] = `postgres://${user}:${password}@${host}:${port}/${name}`;
      drop = database.drop;
    });
    // Registered after the database's beforeAll: the nodes start with its URL.
    const cluster = useCluster(2, extra);
    afterAll(async () => {
      await drop?.();
    });

    it('a device catches up on node B from what another appended on node A, nothing else online', async () => {
      const [nodeA, nodeB] = cluster.nodes;
      if (nodeA === undefined || nodeB === undefined) throw new Error('no nodes');
      const laptop = cluster.client(nodeA);
      await laptop.join(room, 1, deviceToken(userId, 1));
      expect(await append(laptop, 'notes.md', 1, 'one')).toMatchObject({
        type: 'appended',
        pos: 1,
      });
      expect(await append(laptop, 'notes.md', 2, 'two')).toMatchObject({
        type: 'appended',
        pos: 2,
      });
      await laptop.close();

      const desktop = cluster.client(nodeB);
      await desktop.join(room, 2, deviceToken(userId, 2));
      const caught = await catchUp(desktop, 'notes.md');
      expect(caught.entries.map(entryText)).toEqual(['one', 'two']);
      expect(caught.entries.map((e) => e.from)).toEqual(['1', '1']);
      expect(caught.pos).toBe(2);
      // Positions go on from the other node's.
      expect(await append(desktop, 'notes.md', 3, 'three')).toMatchObject({ pos: 3 });
      await desktop.close();
      const metrics = await fetch(`${nodeB.status}/metrics`).then((r) => r.text());
      expect(metrics).toMatch(/^sync_host_store_bytes [1-9]\d*$/m);
    });

    it('a device fetches on node B the chunks another put on node A; a sealed one only under its kc', async () => {
      const [nodeA, nodeB] = cluster.nodes;
      if (nodeA === undefined || nodeB === undefined) throw new Error('no nodes');
      const laptop = cluster.client(nodeA);
      await laptop.join(room, 1, deviceToken(userId, 1));
      const data = randomBytes(100_000);
      expect(await putChunk(laptop, 1, data)).toMatchObject({ type: 'chunk-stored', ref: 1 });
      const key = testKey('cluster');
      const sealed = randomBytes(500);
      const id = sealedId('cluster chunk');
      expect(await putChunk(laptop, 2, sealed, { id, ...key })).toMatchObject({
        type: 'chunk-stored',
      });
      await laptop.close();

      const desktop = cluster.client(nodeB);
      await desktop.join(room, 2, deviceToken(userId, 2));
      const held = await chunkCall(desktop, {
        type: 'chunk-have',
        ref: 3,
        ids: [plainId(data), id],
      });
      expect(held).toEqual({ type: 'chunk-held', ref: 3, ids: [plainId(data)] });
      const got = await chunkCall(desktop, { type: 'chunk-get', ref: 4, id: plainId(data) });
      expect(Buffer.from(got.data as string, 'base64').equals(data)).toBe(true);
      const back = await chunkCall(desktop, { type: 'chunk-get', ref: 5, id, kc: key.kc });
      expect(Buffer.from(back.data as string, 'base64').equals(sealed)).toBe(true);
      expect(await chunkCall(desktop, { type: 'chunk-get', ref: 6, id })).toMatchObject({
        code: 'chunk_missing',
      });
      await desktop.close();
      const metrics = await fetch(`${nodeB.status}/metrics`).then((r) => r.text());
      expect(metrics).toMatch(/^sync_host_store_chunks_sent_total 2$/m);
    });

    it('a node killed with kill -9 loses no append it acknowledged', async () => {
      const [nodeA, nodeB] = cluster.nodes;
      if (nodeA === undefined || nodeB === undefined) throw new Error('no nodes');
      const laptop = cluster.client(nodeA);
      await laptop.join(room, 1, deviceToken(userId, 1));
      // Appends keep coming while the node dies: some are acknowledged, some not.
      const count = 400;
      for (let ref = 1; ref <= count; ref++) {
        laptop.send({ type: 'append', doc: 'killed.md', ref, data: b64(`entry ${ref}`) });
      }
      await laptop.take((f) => f.type === 'appended' && f.doc === 'killed.md', 30_000);
      await nodeA.process.stop('SIGKILL');
      const acked = laptop.frames.filter((f) => f.type === 'appended' && f.doc === 'killed.md');
      expect(acked.length).toBeGreaterThan(0);

      const desktop = cluster.client(nodeB);
      await desktop.join(room, 2, deviceToken(userId, 2));
      const caught = await catchUp(desktop, 'killed.md');
      const stored = new Map(caught.entries.map((e: Frame) => [e.pos as number, entryText(e)]));
      for (const ack of acked) {
        expect(stored.get(ack.pos as number)).toBe(`entry ${ack.ref as number}`);
      }
      // Positions are consecutive: nothing was given twice or skipped.
      expect([...stored.keys()]).toEqual(caught.entries.map((_, i) => i + 1));
      await desktop.close();
    });

    it('a node whose PostgreSQL cannot be reached starts, answers store_unavailable and keeps routing', async () => {
      const processes = new ClusterProcesses();
      try {
        // Nothing listens on that port: the database is unreachable.
        const url = `postgres://postgres:${password}@127.0.0.1:${await freePort()}/nowhere`;
        const node = await processes.relayNode(cluster.nats.url, 'node-unreachable', {
          'store.url': url,
        });
        const laptop = cluster.client(node);
        const desktop = cluster.client(node);
        await laptop.join(room, 1, deviceToken(userId, 1));
        await desktop.join(room, 2, deviceToken(userId, 2));
        expect(await append(laptop, 'notes.md', 1, 'lost')).toMatchObject({
          type: 'error',
          code: 'store_unavailable',
          ref: 1,
        });
        laptop.send({ to: 2, payload: { still: 'routed' } });
        expect(await desktop.message(15_000)).toMatchObject({ payload: { still: 'routed' } });
        const output = [...node.process.stdout, ...node.process.stderr].join('\n');
        expect(output).toContain('PostgreSQL cannot be used yet');
        expect(output).toContain('127.0.0.1');
        expect(output).not.toContain(password);
      } finally {
        await processes.dispose();
      }
    });

    it('never logs the store password', async () => {
      await eventually(() => cluster.nodes.length === 2 || undefined, 'nodes');
      for (const node of cluster.nodes) {
        const output = [...node.process.stdout, ...node.process.stderr].join('\n');
        expect(output).not.toContain(password);
      }
    });
  },
);
