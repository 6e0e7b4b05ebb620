import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import { b64 } from '../helpers/store-client.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken } from './processes.ts';

const skip = natsSkipReason();
const userId = 9;
const room = createRoomId(userId, clusterSecret);

describe.skipIf(skip !== undefined)(
  `the document store on a cluster node without store.url${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const cluster = useCluster(1, {});

    it('answers append and catchup with store_unavailable, and keeps routing', async () => {
      const [node] = cluster.nodes;
      if (node === undefined) throw new Error('no node');
      const laptop = cluster.client(node);
      const desktop = cluster.client(node);
      expect(await laptop.join(room, 1, deviceToken(userId, 1))).toMatchObject({ type: 'joined' });
      expect(await desktop.join(room, 2, deviceToken(userId, 2))).toMatchObject({
        type: 'joined',
      });
      laptop.send({ type: 'append', doc: 'notes.md', ref: 3, data: b64('text') });
      expect(await laptop.error('store_unavailable')).toMatchObject({ doc: 'notes.md', ref: 3 });
      laptop.send({ type: 'catchup', doc: 'notes.md', after: 0 });
      const refused = await laptop.error('store_unavailable');
      expect(refused).toMatchObject({ doc: 'notes.md' });
      expect(refused).not.toHaveProperty('ref');
      laptop.send({ to: 2, payload: { y: 1 } });
      expect(await desktop.message(15_000)).toMatchObject({ from: 1, payload: { y: 1 } });
      expect(laptop.frames.some((f) => f.type === 'appended' || f.type === 'caughtup')).toBe(false);
    });

    it('says at start that it keeps no documents', () => {
      const [node] = cluster.nodes;
      const output = [...(node?.process.stdout ?? []), ...(node?.process.stderr ?? [])];
      expect(output.join('\n')).toContain('cluster node without store.url');
    });
  },
);
