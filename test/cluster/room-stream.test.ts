import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureStream, readRange, streamOf } from '../../server/cluster/room-stream.ts';
import { encodeRecord } from '../../server/cluster/stream-record.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(`room stream reads${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let nats: NatsServer | undefined;
  let nc: NatsConnection | undefined;
  afterAll(async () => {
    await nc?.close();
    await nats?.dispose();
  });

  it('reads a replay up to its last sequence, also when the consumer has nothing pending before it', {
    timeout: 60_000,
  }, async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    const roomId = 'room-stream-test';
    await ensureStream(await jetstreamManager(nc), roomId, 60_000, 1);
    const js = jetstream(nc);
    const publish = async (i: number) => {
      const frame = Buffer.from(JSON.stringify({ from: '1', payload: { tag: `m${i}` } }));
      const { payload } = encodeRecord({ to: '2', from: '1', node: 'node-1', nodeSeq: i, frame });
      await js.publish(streamOf(roomId).subject, payload);
    };
    await publish(1);
    await publish(2);

    // the replay must reach sequence 3 (the stream's leader has it); the consumer's server
    // has only 1 and 2 so far, as a server of a NATS cluster catching up after a restart: its
    // consumer says nothing is pending after 2
    const read = readRange(js, roomId, 0, 3);
    let ended = false;
    void read.finally(() => {
      ended = true;
    });
    const jsm = await jetstreamManager(nc);
    await eventually(async () => {
      if (ended) return true;
      for await (const info of jsm.consumers.list(streamOf(roomId).stream)) {
        if (info.delivered.stream_seq >= 2) return true;
      }
      return undefined;
    }, 'the read consumer at sequence 2 with nothing pending (or the read ended)');
    await publish(3);

    const frames = await read;
    expect(frames.map((f) => f.seq)).toEqual([1, 2, 3]);
    expect(frames.map((f) => f.nodeSeq)).toEqual([1, 2, 3]);
  });
});
