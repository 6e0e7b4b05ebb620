import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { followOrdered } from '../../server/cluster/ordered-follow.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(`ordered follower${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let nats: NatsServer | undefined;
  let nc: NatsConnection | undefined;
  afterAll(async () => {
    if (nats?.pid !== undefined) process.kill(nats.pid, 'SIGCONT');
    await nc?.close();
    await nats?.dispose();
  });

  it('makes a consumer that fell silent again and goes on after the last message taken, none twice', {
    timeout: 60_000,
  }, async () => {
    nats = await startNatsServer();
    // the client's own pings would notice a frozen server only after minutes
    nc = await connect({ servers: nats.url, pingInterval: 120_000 });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'FOLLOWED', subjects: ['followed'] });
    const js = jetstream(nc);
    const publish = async (from: number, to: number) => {
      for (let i = from; i < to; i++) await js.publish('followed', String(i));
    };
    await publish(0, 5);
    const seen: number[] = [];
    const restarts: string[] = [];
    const stop = followOrdered(js, {
      stream: 'FOLLOWED',
      from: 1,
      onMessage: (m) => seen.push(Number(m.string())),
      onRestart: (err) => restarts.push(String(err)),
    });
    try {
      await eventually(() => seen.length === 5, 'the first five');

      // the server holding the consumer stops answering, its connection still open (as a
      // server of a NATS cluster that is gone while the client is on another one)
      const pid = nats.pid!;
      process.kill(pid, 'SIGSTOP');
      await eventually(() => restarts.length > 0, 'the silent consumer given up', 20_000);
      process.kill(pid, 'SIGCONT');
      expect(restarts[0]).toContain('silent');

      await publish(5, 10);
      await eventually(() => seen.length >= 10, 'the next five', 20_000);
      expect(seen).toEqual([...Array(10).keys()]);
      // the consumers given up (and those made too late) are not left on the server
      await eventually(
        async () => {
          const names: string[] = [];
          for await (const info of jsm.consumers.list('FOLLOWED')) names.push(info.name);
          return names.length === 1;
        },
        'one consumer left on the stream',
        20_000,
      );
    } finally {
      stop();
    }
  });
});
