import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { natsSkipReason } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';
import { useCluster } from './fixture.ts';
import { clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const user = 51;

describe.skipIf(skip !== undefined)(
  `cluster joins JetStream does not answer${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const cluster = useCluster(2, { 'buffer.seconds': 60 });
    const room = createRoomId(user, clusterSecret);

    async function join(node: RelayNode, device: number) {
      const client = cluster.client(node);
      const joined = await client.join(room, device, deviceToken(user, device));
      return { client, joined };
    }

    /** A join sent and left unanswered for now. */
    async function startJoin(node: RelayNode, device: number): Promise<RelayClient> {
      const client = cluster.client(node);
      await client.opened;
      client.send({ type: 'join', room, device, token: deviceToken(user, device) });
      return client;
    }

    const logged = (node: RelayNode, text: string): boolean =>
      [...node.process.stdout, ...node.process.stderr].some((line) => line.includes(text));

    it('closes with 1013 a join whose room stream or roster write JetStream does not answer, and keeps nothing of it', {
      timeout: 180_000,
    }, async () => {
      const [a, b] = cluster.nodes as [RelayNode, RelayNode];
      const { client: first } = await join(a, 1);
      // device 5 dropped from node 2: three messages are kept for it in the room's stream
      const { client: kept } = await join(b, 5);
      await first.next('presence');
      await kept.close();
      await first.take((f) => f.type === 'presence' && f.device === 5 && f.state === 'left');
      for (let n = 0; n < 3; n++) first.send({ to: 5, payload: { n } });
      await first.sync();

      // NATS freezes: the nodes still count as connected for a few seconds, so these joins pass
      // the 1013 of a node cut off from NATS and wait for JetStream instead
      const pid = cluster.nats.pid as number;
      process.kill(pid, 'SIGSTOP');
      let refused: RelayClient[];
      try {
        refused = [
          await startJoin(b, 2), // node 2 does not hold the room yet: its stream must be opened
          await startJoin(a, 3), // node 1 holds it: the roster write gets no answer
          await startJoin(a, 5), // kept for: must stay kept for
        ];
        for (const client of refused) expect((await client.waitClosed(30_000)).code).toBe(1013);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      for (const client of refused) {
        expect(client.frames.filter((f) => f.type === 'joined')).toEqual([]);
      }
      // the broker refused them (not the node cut off from NATS before the join)
      expect(logged(a, 'join not registered') && logged(b, 'join not registered')).toBe(true);

      // back: nobody of the refused joins stays in the room (a roster write sent before NATS froze
      // is applied when it wakes up, and written back right after); device 5 is still kept for
      await eventually(
        async () => {
          const probe = new RelayClient(b.url);
          const answer = await probe.join(room, 4, deviceToken(user, 4)).catch(() => undefined);
          probe.terminate();
          return (
            (answer?.type === 'joined' && JSON.stringify(answer.devices) === '[1,4]') || undefined
          );
        },
        'joins taken again, with device 1 the only one present',
        60_000,
      );
      const { client: back, joined } = await join(b, 5);
      expect(joined).toMatchObject({ type: 'joined', buffered: 3, gap: false });
      for (let n = 0; n < 3; n++) expect((await back.message(10_000)).payload).toEqual({ n });
    });
  },
);
