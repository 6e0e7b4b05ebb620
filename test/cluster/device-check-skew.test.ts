import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Host } from '../../server/host.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { startSkewedRelay } from '../helpers/skewed-relay.ts';
import { type AuthProcess, ClusterProcesses, clusterSecret } from './processes.ts';

const skip = natsSkipReason();
/** Past the 300 s a relay credential may be from the auth process's clock. */
const skewMs = -400_000;

/**
 * A relay node whose clock is 400 s behind the auth processes' (an injected clock): its device
 * checks over NATS are still answered, so a token of a device that was never issued is refused.
 */
describe.skipIf(skip !== undefined)(
  `device checks from a node with a wrong clock${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer;
    let auth: AuthProcess;
    let host: Host | undefined;
    let url: string;
    let lines: string[];

    beforeAll(async () => {
      nats = await startNatsServer();
      auth = await processes.authProcess(nats.url);
      const dir = processes.dir();
      writeConf(dir, 'relay.conf', {
        'auth.secret': clusterSecret,
        'sqlite.path': './relay.db',
        'ws.port': 0,
        'status.port': 0,
        bind: '127.0.0.1',
        'cluster.nats': nats.url,
        'cluster.insecure': 'true',
        'cluster.node': 'late',
      });
      const started = await startSkewedRelay(dir, skewMs);
      host = started.host;
      lines = started.lines;
      url = host.urls.relay ?? '';
    }, 120_000);

    afterAll(async () => {
      for (const c of clients) c.terminate();
      await host?.close();
      await processes.dispose();
      await nats?.dispose();
    });

    const client = () => {
      const c = new RelayClient(url);
      clients.push(c);
      return c;
    };

    it('refuses a never-issued device and lets the real one in, on the auth processes’ clock', {
      timeout: 60_000,
    }, async () => {
      const owner = await auth.signIn('late@example.org', 'laptop');
      const room = createRoomId(owner.user.id, clusterSecret);
      const ghost = owner.device.id + 1000;
      const forged = signDeviceToken(
        { userId: owner.user.id, deviceId: ghost, issuedAt: Math.floor(Date.now() / 1000) },
        clusterSecret,
        'hmac-sha256',
      );
      const refused = client();
      expect(await refused.join(room, ghost, forged)).toMatchObject({
        type: 'error',
        code: 'auth_failed',
      });
      expect(await client().join(room, owner.device.id, owner.deviceToken)).toMatchObject({
        type: 'joined',
      });
      expect(lines.join('\n')).toMatch(/the auth processes' clock is 4\d\d s ahead of this node's/);
    });
  },
);
