import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Host } from '../../server/host.ts';
import { createRoomId } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { startSkewedRelay } from '../helpers/skewed-relay.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const skewMs = 120_000;

/** A relay node in this process whose clock is off, with its log lines. */
interface SkewedNode extends Omit<RelayNode, 'process'> {
  lines: string[];
}

async function health(status: string): Promise<{ cluster: { clockOffsetMs: number | null } }> {
  return (await fetch(`${status}/health`).then((r) => r.json())) as {
    cluster: { clockOffsetMs: number | null };
  };
}

/**
 * Nodes whose clocks are 120 s behind and 120 s ahead (an injected clock) beside one whose clock
 * is right: a device that drops on one and comes back on another gets what was kept for it.
 */
describe.skipIf(skip !== undefined)(
  `cluster clock skew${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const hosts: Host[] = [];
    const clients: RelayClient[] = [];
    let nats: NatsServer;
    let right: RelayNode;
    let behind: SkewedNode;
    let ahead: SkewedNode;

    async function skewedNode(name: string, offsetMs: number): Promise<SkewedNode> {
      const dir = processes.dir();
      writeConf(dir, 'relay.conf', {
        'auth.secret': clusterSecret,
        'sqlite.path': './relay.db',
        'ws.port': 0,
        'status.port': 0,
        bind: '127.0.0.1',
        'cluster.nats': nats.url,
        'cluster.insecure': 'true',
        'cluster.node': name,
      });
      const { host, lines } = await startSkewedRelay(dir, offsetMs);
      hosts.push(host);
      return { url: host.urls.relay ?? '', status: host.urls.status ?? '', lines };
    }

    beforeAll(async () => {
      nats = await startNatsServer();
      [right, behind, ahead] = await Promise.all([
        processes.relayNode(nats.url, 'right'),
        skewedNode('behind', -skewMs),
        skewedNode('ahead', skewMs),
      ]);
      // each skewed node has measured its offset from NATS's clock (on its heartbeats)
      for (const [node, offset] of [
        [behind, skewMs],
        [ahead, -skewMs],
      ] as const) {
        await eventually(
          async () => {
            const measured = (await health(node.status)).cluster.clockOffsetMs;
            return measured !== null && Math.abs(measured - offset) < 5_000 ? true : undefined;
          },
          'the clock offset measured',
          20_000,
        );
      }
    }, 120_000);

    afterAll(async () => {
      for (const c of clients) c.terminate();
      for (const host of hosts) await host.close();
      await processes.dispose();
      await nats?.dispose();
    });

    const client = (node: { url: string }) => {
      const c = new RelayClient(node.url);
      clients.push(c);
      return c;
    };

    /**
     * Device 2 of `userId` drops from `dropOn` while device 1 on `senderOn` sends it 50 messages;
     * device 2 comes back on `backOn` and must get all 50, in order, without a gap.
     */
    async function dropSendRejoin(
      userId: number,
      senderOn: { url: string },
      dropOn: { url: string },
      backOn: { url: string },
    ): Promise<void> {
      const room = createRoomId(userId, clusterSecret);
      const sender = client(senderOn);
      await sender.join(room, 1, deviceToken(userId, 1));
      const dropping = client(dropOn);
      await dropping.join(room, 2, deviceToken(userId, 2));
      await sender.next('presence');
      dropping.terminate();
      expect(await sender.next('presence', 15_000)).toMatchObject({
        state: 'left',
        reason: 'disconnect',
      });
      for (let n = 0; n < 50; n++) sender.send({ to: 2, payload: { n } });
      await sender.sync();
      expect(sender.frames.filter((f) => f.type === 'error')).toEqual([]);
      const back = client(backOn);
      const joined = await back.join(room, 2, deviceToken(userId, 2));
      expect(joined).toMatchObject({ type: 'joined', buffered: 50, gap: false });
      const got: unknown[] = [];
      for (let n = 0; n < 50; n++) got.push((await back.message()).payload);
      expect(got).toEqual(Array.from({ length: 50 }, (_, n) => ({ n })));
    }

    it('keeps what a device missed when it dropped on a node 120 s behind and comes back on another', async () => {
      await dropSendRejoin(51, right, behind, right);
    });

    it('keeps what a device missed when it comes back on a node 120 s ahead', async () => {
      await dropSendRejoin(52, right, right, ahead);
    });

    it('reports the offset on /health and says it in the log', async () => {
      expect((await health(behind.status)).cluster.clockOffsetMs).toBeGreaterThan(skewMs - 5_000);
      expect((await health(ahead.status)).cluster.clockOffsetMs).toBeLessThan(-skewMs + 5_000);
      expect(behind.lines.join('\n')).toMatch(/clock is 1[12]\d\.\d s behind NATS/);
      expect(ahead.lines.join('\n')).toMatch(/clock is 1[12]\d\.\d s ahead of NATS/);
      const rightOffset = (await health(right.status)).cluster.clockOffsetMs;
      expect(Math.abs(rightOffset ?? Number.NaN)).toBeLessThan(2_000);
    });
  },
);
