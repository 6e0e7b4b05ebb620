import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClusterBroker } from '../../server/cluster/cluster-broker.ts';
import { createLogger } from '../../server/log.ts';
import { createRelay } from '../../server/relay/relay.ts';
import { testRelayConfig } from '../helpers/configs.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `a cluster node's relay${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let nats: NatsServer;
    let dir: string;

    beforeAll(async () => {
      nats = await startNatsServer();
      dir = mkdtempSync(join(tmpdir(), 'cluster-no-sqlite-'));
    });
    afterAll(async () => {
      await nats?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    it('opens no SQLite file: what it keeps is in NATS', async () => {
      const config = testRelayConfig(dir, {});
      const logger = createLogger('silent');
      const broker = createClusterBroker({
        urls: [nats.url],
        node: 'no-sqlite',
        bufferWindowMs: config.bufferSeconds * 1000,
        secret: 'x'.repeat(32),
        logger,
      });
      const relay = createRelay({ config, secret: 'x'.repeat(32), logger, broker });
      const ports = await relay.listen();
      try {
        await eventually(async () => {
          const health = await fetch(`http://127.0.0.1:${ports.statusPort}/health`);
          return health.status === 200;
        }, 'the relay answers /health');
        expect(existsSync(config.sqlitePath)).toBe(false);
        expect(readdirSync(dir).filter((name) => name.includes('.db'))).toEqual([]);
      } finally {
        await relay.close();
      }
      expect(existsSync(config.sqlitePath)).toBe(false);
    });
  },
);
