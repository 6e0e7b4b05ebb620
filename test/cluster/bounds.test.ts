import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient, tcpOf, upgradeStatus } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const mebibyte = 1024 * 1024;
const fast = { 'rate.perSecond': 100_000, 'rate.burst': 100_000, 'buffer.seconds': 60 };
const chunk = 'z'.repeat(64_000);

const numbers = (client: RelayClient): number[] =>
  client.allMessages().map((f) => (f.payload as { n: number }).n);
const upTo = (n: number): number[] => [...Array(n).keys()];

describe.skipIf(skip !== undefined)(
  `cluster bounds per node (6.11)${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer;
    /** Senders, with room for two connections per address waiting to join. */
    let senders: RelayNode;
    /** 2 MiB unsent per receiver. */
    let queued: RelayNode;
    /** 4 MiB unsent in the whole node, 20 messages of burst per connection. */
    let memory: RelayNode;

    beforeAll(async () => {
      nats = await startNatsServer();
      [senders, queued, memory] = await Promise.all([
        processes.relayNode(nats.url, 'senders', { ...fast, 'relay.maxUnjoinedPerAddress': 2 }),
        processes.relayNode(nats.url, 'queued', {
          ...fast,
          'message.maxBytes': 128 * 1024,
          'relay.maxQueuedBytes': 2 * mebibyte,
        }),
        processes.relayNode(nats.url, 'memory', {
          ...fast,
          'rate.perSecond': 5,
          'rate.burst': 20,
          'message.maxBytes': 128 * 1024,
          'relay.maxQueuedBytes': 4 * mebibyte,
          'relay.maxMemoryBytes': 4 * mebibyte,
        }),
      ]);
    }, 120_000);

    afterAll(async () => {
      for (const client of clients) client.terminate();
      await processes.dispose();
      await nats?.dispose();
    });

    const rooms = new Map<number, string>();
    async function join(node: RelayNode, user: number, device: number): Promise<RelayClient> {
      const room = rooms.get(user) ?? createRoomId(user, clusterSecret);
      rooms.set(user, room);
      const client = new RelayClient(node.url);
      clients.push(client);
      const joined = await client.join(room, device, deviceToken(user, device));
      expect(joined).toMatchObject({ type: 'joined' });
      return client;
    }

    /**
     * 64 KB messages from `sender` to device 2 until it is cut (its presence `left`) or `max` were
     * sent, then five more for it while it is absent; resolves with the count sent.
     */
    async function sendUntilCut(sender: RelayClient, max: number): Promise<number> {
      const cut = () => sender.frames.some((f) => f.type === 'presence' && f.state === 'left');
      let sent = 0;
      while (!cut() && sent < max) {
        sender.send({ to: 2, payload: { n: sent++, chunk } });
        if (sent % 4 === 0) await sender.sync();
      }
      if (cut()) for (let i = 0; i < 5; i++) sender.send({ to: 2, payload: { n: sent++, chunk } });
      await sender.sync();
      return sent;
    }

    /**
     * The paused receiver reads again: it got everything live, or it was closed with 1013 and gets
     * the rest on a join on `rejoinOn`, once, in order, with `buffered` exact and no gap.
     */
    async function drain(
      receiver: RelayClient,
      user: number,
      sent: number,
      rejoinOn: RelayNode,
    ): Promise<'complete' | number> {
      tcpOf(receiver).resume();
      const got = await Promise.race([
        receiver.closed.then((info) => info.code),
        receiver
          .take((f) => (f.payload as { n?: number } | undefined)?.n === sent - 1, 30_000)
          .then(() => 'complete' as const),
      ]);
      if (got === 'complete') {
        expect(numbers(receiver)).toEqual(upTo(sent));
        return got;
      }
      const live = numbers(receiver);
      expect(live).toEqual(upTo(live.length));
      const back = await join(rejoinOn, user, 2);
      const joined = back.frames.find((f) => f.type === 'joined');
      expect(joined).toMatchObject({ buffered: sent - live.length, gap: false });
      for (let k = live.length; k < sent; k++) await back.message(15_000);
      expect([...live, ...numbers(back)]).toEqual(upTo(sent));
      return got;
    }

    it('closes a paused receiver with 1013 past relay.maxQueuedBytes on its node, and replays the rest from the stream on any node', {
      timeout: 120_000,
    }, async () => {
      const sender = await join(senders, 61, 1);
      const slow = await join(queued, 61, 2);
      await sender.next('presence');
      tcpOf(slow).pause();
      // 640 × 64 KB = 40 MB: a node that holds everything for it never cuts it
      const sent = await sendUntilCut(sender, 640);
      expect(sender.frames.some((f) => f.type === 'presence' && f.state === 'left')).toBe(true);
      expect(await drain(slow, 61, sent, senders)).toBe(1013);
    });

    it('hands what a paused receiver had queued on its node to its new connection on another node', {
      timeout: 120_000,
    }, async () => {
      const sender = await join(queued, 65, 1);
      const slow = await join(senders, 65, 2);
      await sender.next('presence');
      tcpOf(slow).pause();
      // until its node holds frames for it unsent beyond what a socket's buffer takes at once
      const unsent = async () => {
        const text = await (await fetch(`${senders.status}/metrics`)).text();
        return Number(/^relay_unsent_bytes (\d+)$/m.exec(text)?.[1] ?? 0);
      };
      let sent = 0;
      while ((await unsent()) < mebibyte && sent < 200) {
        for (let i = 0; i < 2; i++) sender.send({ to: 2, payload: { n: sent++, chunk } });
        await sender.sync();
      }
      expect(await unsent()).toBeGreaterThanOrEqual(mebibyte);
      const moved = await join(queued, 65, 2);
      expect(moved.frames.find((f) => f.type === 'joined')).toMatchObject({ gap: false });
      tcpOf(slow).resume();
      expect((await slow.waitClosed(30_000)).code).toBe(4009);
      const live = numbers(slow);
      expect(live).toEqual(upTo(live.length));
      expect(live.length).toBeLessThan(sent);
      await eventually(
        () => live.length + numbers(moved).length >= sent || undefined,
        'the rest on the new connection',
        30_000,
      );
      expect([...live, ...numbers(moved)]).toEqual(upTo(sent));
    });

    it('closes the slowest receivers with 1013 past relay.maxMemoryBytes of their node, and loses nothing', {
      timeout: 180_000,
    }, async () => {
      const users = [71, 72, 73];
      const from: RelayClient[] = [];
      const to: RelayClient[] = [];
      for (const user of users) {
        from.push(await join(senders, user, 1));
        to.push(await join(memory, user, 2));
      }
      for (const sender of from) await sender.next('presence');
      for (const receiver of to) tcpOf(receiver).pause();
      // 3 × 200 × 64 KB = 38 MB for a node that may hold 4 MiB unsent
      const sent = await Promise.all(from.map((sender) => sendUntilCut(sender, 200)));
      const results: Array<'complete' | number> = [];
      for (const [i, receiver] of to.entries()) {
        results.push(await drain(receiver, users[i] as number, sent[i] as number, memory));
      }
      expect(results).toContain(1013);
      expect(results.filter((r) => r !== 'complete' && r !== 1013)).toEqual([]);
    });

    it('limits the rate per connection on its node: what is refused is rate_limited, the rest arrives', {
      timeout: 60_000,
    }, async () => {
      const receiver = await join(senders, 81, 1);
      const fastSender = await join(memory, 81, 2);
      await receiver.next('presence');
      // 60 at once on a bucket of 20 refilled at 5/s: most are refused
      for (let n = 0; n < 60; n++) fastSender.send({ to: 1, payload: { n } });
      const refused = () => fastSender.frames.filter((f) => f.code === 'rate_limited').length;
      await eventually(
        () => numbers(receiver).length + refused() === 60 || undefined,
        'every message delivered or refused',
        30_000,
      );
      expect(refused()).toBeGreaterThan(0);
      const delivered = numbers(receiver);
      expect(delivered).toEqual([...delivered].sort((x, y) => x - y));
      // another connection on the same node has its own bucket
      const other = await join(memory, 81, 3);
      for (let n = 100; n < 105; n++) other.send({ to: 1, payload: { n } });
      await eventually(
        () => numbers(receiver).filter((n) => n >= 100).length === 5 || undefined,
        'the other connection',
        30_000,
      );
      expect(other.frames.filter((f) => f.code === 'rate_limited')).toEqual([]);
    });

    it('counts relay.maxUnjoinedPerAddress per node', { timeout: 60_000 }, async () => {
      const idle = [new RelayClient(senders.url), new RelayClient(senders.url)];
      clients.push(...idle);
      for (const client of idle) await client.opened;
      expect(await upgradeStatus(senders.url)).toBe(429);
      // the other nodes count their own
      expect(await upgradeStatus(queued.url)).toBe(101);
      // one of the two joins: a place is free again
      const room = createRoomId(91, clusterSecret);
      expect(await idle[0]?.join(room, 1, deviceToken(91, 1))).toMatchObject({ type: 'joined' });
      expect(await upgradeStatus(senders.url)).toBe(101);
    });
  },
);
