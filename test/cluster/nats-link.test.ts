import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openNatsLink } from '../../server/cluster/nats-link.ts';
import { createLogger } from '../../server/log.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `one NATS connection per process${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let nats: NatsServer;
    const logger = createLogger('silent');

    beforeAll(async () => {
      nats = await startNatsServer();
    });
    afterAll(async () => {
      await nats?.dispose();
    });

    it('gives every user of the same servers one connection, closed with the last of them', async () => {
      const broker = openNatsLink([nats.url], 'broker', logger);
      const revocations = openNatsLink([nats.url], 'revocations', logger);
      const heard: string[] = [];
      broker.onConnected(() => heard.push('broker'));
      await eventually(() => broker.connected && revocations.connected, 'both connected');
      revocations.onConnected(() => heard.push('revocations'));
      const connection = broker.connection;
      expect(connection).toBeDefined();
      expect(revocations.connection).toBe(connection);
      expect(heard).toEqual(['broker', 'revocations']);

      await broker.close();
      expect(broker.connected).toBe(false);
      expect(broker.connection).toBeUndefined();
      expect(revocations.connected).toBe(true);
      expect(connection?.isClosed()).toBe(false);

      await revocations.close();
      expect(connection?.isClosed()).toBe(true);
    });

    it('opens a new connection once the last one was closed', async () => {
      const first = openNatsLink([nats.url], 'first', logger);
      await eventually(() => first.connected, 'connected');
      const old = first.connection;
      await first.close();
      const second = openNatsLink([nats.url], 'second', logger);
      await eventually(() => second.connected, 'connected again');
      expect(second.connection).not.toBe(old);
      await second.close();
    });
  },
);
