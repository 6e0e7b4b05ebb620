import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type NatsCluster,
  type NatsServer,
  natsSkipReason,
  startNatsCluster,
  startNatsServer,
  waitForJetStream,
} from '../helpers/nats-server.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `nats-server harness${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const started: Array<NatsServer | NatsCluster> = [];
    afterAll(async () => {
      await Promise.all(started.map((s) => s.dispose()));
    });

    it('starts a JetStream server on a free port, stops it by pid and starts it again with its data', async () => {
      const server = await startNatsServer();
      started.push(server);
      expect(server.pid).toBeTypeOf('number');
      const nc = await connect({ servers: server.url });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'HARNESS', subjects: ['harness.>'] });
      await jetstream(nc).publish('harness.a', 'kept');
      await nc.close();

      await server.stop();
      expect(server.pid).toBeUndefined();
      await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow();

      await server.start();
      await waitForJetStream(server.url);
      const again = await connect({ servers: server.url });
      const info = await (await jetstreamManager(again)).streams.info('HARNESS');
      expect(info.state.messages).toBe(1);
      await again.close();
    });

    it('runs a 3-server cluster whose replicated stream survives losing one server', async () => {
      const cluster = await startNatsCluster(3);
      started.push(cluster);
      const nc = await connect({ servers: cluster.urls });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'HARNESS3', subjects: ['harness3.>'], num_replicas: 3 });
      const js = jetstream(nc);
      await js.publish('harness3.a', 'one');
      await cluster.servers[0]!.kill();
      const until = Date.now() + 15_000;
      for (;;) {
        try {
          await js.publish('harness3.a', 'two', { timeout: 1_000 });
          break;
        } catch (err: unknown) {
          if (Date.now() > until) throw err;
        }
      }
      expect((await jsm.streams.info('HARNESS3')).state.messages).toBe(2);
      await nc.close();
    });
  },
);
