import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterCounters } from '../../server/cluster/cluster-metrics.ts';
import { Publications } from '../../server/cluster/publications.ts';
import {
  ensureStream,
  readRange,
  streamBounds,
  streamOf,
} from '../../server/cluster/room-stream.ts';
import { encodeRecord, isRecordOf } from '../../server/cluster/stream-record.ts';
import { captureLogger } from '../helpers/capture.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `publications to a room's stream${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let server: NatsServer;
    let nc: NatsConnection;
    beforeAll(async () => {
      server = await startNatsServer();
      nc = await connect({ servers: server.url });
    });
    afterAll(async () => {
      await nc.close();
      await server.dispose();
    });

    const counters = (): ClusterCounters => ({
      published: 0,
      publishFailures: 0,
      received: 0,
      replayed: 0,
    });

    /** Publishes `frame` from device `from` to `to` in `room` as node `node-a`. */
    function publish(
      publications: Publications,
      room: string,
      frame: object,
      to = '*',
      from = '1',
    ): number {
      const n = publications.begin(room, from);
      const { payload, headers: h } = encodeRecord({
        to,
        from,
        node: 'node-a',
        nodeSeq: n,
        frame: Buffer.from(JSON.stringify({ from: Number(from), to, payload: frame })),
      });
      publications.send(nc, n, streamOf(room).subject, payload, h);
      return n;
    }

    it('settles once NATS stored every frame published before, in order', async () => {
      const room = 'room-settle';
      await ensureStream(await jetstreamManager(nc), room, 60_000, 1);
      const count = counters();
      const publications = new Publications(count, captureLogger().logger);
      for (let i = 0; i < 200; i++) publish(publications, room, { i });
      expect(publications.settled()).toBeInstanceOf(Promise);
      await publications.settled();
      expect(count).toMatchObject({ published: 200, publishFailures: 0 });
      expect(publications.settled()).toBeUndefined();
      const bounds = await streamBounds(await jetstreamManager(nc), room);
      const stored = await readRange(jetstream(nc), room, 0, bounds.last);
      expect(stored.map((f) => JSON.parse(f.frame.toString()).payload.i)).toEqual([
        ...Array(200).keys(),
      ]);
      expect(stored[5]).toMatchObject({ seq: 6, to: '*', from: '1', node: 'node-a', nodeSeq: 6 });
      publications.stop();
    });

    it('counts a frame NATS refuses (no stream) as failed, logs it, and still settles', async () => {
      const count = counters();
      const { logger, lines } = captureLogger();
      const publications = new Publications(count, logger);
      publish(publications, 'room-without-stream', { i: 0 });
      await publications.settled();
      expect(count).toMatchObject({ published: 0, publishFailures: 1 });
      expect(lines.join('\n')).toContain('frame not published');
      publications.stop();
    });

    it("holds a frame NATS did not store against its sender's next ping, once", async () => {
      const publications = new Publications(counters(), captureLogger().logger);
      const room = 'room-without-stream';
      publish(publications, room, { i: 0 }, '2', '1');
      // its sender's ping is not answered with a pong: the relay closes the connection instead
      expect(await publications.stored(room, '1')).toBe(false);
      expect(publications.stored(room, '1')).toBeUndefined();
      expect(publications.stored(room, '2')).toBeUndefined();
      publish(publications, room, { i: 1 }, '1', '2');
      expect(await publications.stored(room, '1')).toBe(true);
      expect(await publications.stored(room, '2')).toBe(false);
      publications.stop();
    });

    it("stores a re-send of a frame with the client library's envelope once", async () => {
      const room = 'room-dedup';
      await ensureStream(await jetstreamManager(nc), room, 60_000, 1);
      const count = counters();
      const publications = new Publications(count, captureLogger().logger);
      const frame = { _sync: { s: 'session-1', n: 7 }, text: 'hello' };
      publish(publications, room, frame, '2');
      publish(publications, room, frame, '2');
      publish(publications, room, { _sync: { s: 'session-1', n: 8 }, text: 'next' }, '2');
      await publications.settled();
      expect(count).toMatchObject({ published: 3, publishFailures: 0 });
      const bounds = await streamBounds(await jetstreamManager(nc), room);
      const stored = await readRange(jetstream(nc), room, 0, bounds.last);
      expect(stored.map((f) => JSON.parse(f.frame.toString()).payload.text)).toEqual([
        'hello',
        'next',
      ]);
      expect(stored[0]).toMatchObject({ to: '2', from: '1', node: 'node-a' });
      publications.stop();
    });

    it('reads a frame of the format before (routing in headers) as it was written', async () => {
      const room = 'room-before';
      await ensureStream(await jetstreamManager(nc), room, 60_000, 1);
      const h = headers();
      h.set('t', 'dévice-2');
      h.set('f', '1');
      h.set('n', 'node-b');
      h.set('q', '42');
      await jetstream(nc).publish(streamOf(room).subject, '{"from":1,"payload":{}}', {
        headers: h,
      });
      const [old] = await readRange(jetstream(nc), room, 0, 1);
      expect(old).toMatchObject({ seq: 1, to: 'dévice-2', from: '1', node: 'node-b', nodeSeq: 42 });
      expect(old?.frame.toString()).toBe('{"from":1,"payload":{}}');
    });

    it("tells a node's own records from the others' by their node", () => {
      const { payload } = encodeRecord({
        to: 'ünï',
        from: 'x',
        node: 'node-a',
        nodeSeq: 1,
        frame: Buffer.from('{}'),
      });
      expect(isRecordOf(payload, Buffer.from('node-a'))).toBe(true);
      expect(isRecordOf(payload, Buffer.from('node-ab'))).toBe(false);
      expect(isRecordOf(payload, Buffer.from('node-b'))).toBe(false);
      expect(isRecordOf(Buffer.from('{"from":1}'), Buffer.from('node-a'))).toBe(false);
    });
  },
);
