import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { deviceCheckSubject } from '../../server/cluster/nats-device-lookups.ts';
import { revocationBucket } from '../../server/cluster/revocations.ts';
import { sha256Hex } from '../../server/hashing.ts';
import { createRoomId, signDeviceToken, signRelayCredential } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret } from './processes.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `cluster revocation${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer | undefined;
    // Its own NATS server: every auth process on one NATS answers device checks, so they must
    // share one database, which the first test's does not.
    let djb2Nats: NatsServer | undefined;
    let proxy: TcpProxy | undefined;
    afterAll(async () => {
      for (const client of clients) client.terminate();
      await processes.dispose();
      await proxy?.close();
      await nats?.dispose();
      await djb2Nats?.dispose();
    });

    async function joined(url: string, room: string, device: number, token: string) {
      const client = new RelayClient(url);
      clients.push(client);
      expect(await client.join(room, device, token)).toMatchObject({ type: 'joined' });
      return client;
    }

    it('closes a deleted device on every node within 5 s, also on a node that was cut off from NATS meanwhile', {
      timeout: 90_000,
    }, async () => {
      nats = await startNatsServer();
      proxy = await startTcpProxy('127.0.0.1', nats.port);
      const [auth, nodeA, nodeB] = await Promise.all([
        processes.authProcess(nats.url),
        processes.relayNode(nats.url, 'node-a'),
        processes.relayNode(`nats://127.0.0.1:${proxy.port}`, 'node-b'),
      ]);

      const keeper = await auth.signIn('owner@example.org', 'keeper');
      const first = await auth.signIn('owner@example.org', 'first');
      const second = await auth.signIn('owner@example.org', 'second');
      const third = await auth.signIn('owner@example.org', 'third');
      const room = createRoomId(keeper.user.id, clusterSecret);
      const owner = createAuthClient({ authUrl: auth.url, deviceToken: keeper.deviceToken });

      const onA = await joined(nodeA.url, room, first.device.id, first.deviceToken);
      const onB = await joined(nodeB.url, room, third.device.id, third.deviceToken);
      const deletedAt = Date.now();
      await Promise.all([owner.deleteDevice(first.device.id), owner.deleteDevice(third.device.id)]);
      expect((await onA.waitClosed(5_000)).code).toBe(4003);
      expect((await onB.waitClosed(5_000)).code).toBe(4003);
      expect(Date.now() - deletedAt).toBeLessThan(5_000);

      // Node B loses NATS; a device is deleted and its revocation stored meanwhile; node B
      // applies it once NATS is reachable again.
      const stillOnB = await joined(nodeB.url, room, second.device.id, second.deviceToken);
      await proxy.cut();
      await eventually(
        () => nodeB.process.stderr.find((line) => line.includes('lost the connection to NATS')),
        'node B to notice the cut',
      );
      await owner.deleteDevice(second.device.id);
      const observer = await connect({ servers: nats.url });
      const kv = await new Kvm(observer).open(revocationBucket);
      await eventually(
        async () => (await kv.get(String(second.device.id))) ?? undefined,
        'the revocation',
      );
      await observer.close();
      expect(stillOnB.closeInfo).toBeUndefined();
      await proxy.restore();
      const restoredAt = Date.now();
      expect((await stillOnB.waitClosed(5_000)).code).toBe(4003);
      expect(Date.now() - restoredAt).toBeLessThan(5_000);

      // A deleted device cannot join any node again.
      for (const url of [nodeA.url, nodeB.url]) {
        const again = new RelayClient(url);
        clients.push(again);
        expect(await again.join(room, second.device.id, second.deviceToken)).toMatchObject({
          type: 'error',
          code: 'auth_failed',
        });
      }
    });

    it('checks joins against the auth processes over NATS: a forged djb2 token of an existing device is refused, and so is an answer without the secret', {
      timeout: 90_000,
    }, async () => {
      djb2Nats = await startNatsServer();
      const natsUrl = djb2Nats.url;
      const [auth, node] = await Promise.all([
        processes.authProcess(natsUrl, { TOKEN_SIGNATURE: 'djb2' }),
        processes.relayNode(natsUrl, 'node-djb2', { 'auth.tokenSignature': 'djb2' }),
      ]);
      const victim = await auth.signIn('victim@example.org', 'victim');
      const spare = await auth.signIn('victim@example.org', 'spare');
      const room = createRoomId(victim.user.id, clusterSecret);
      // What someone who recovered the djb2 key state from one token can sign.
      const forge = (deviceId: number) =>
        signDeviceToken(
          { userId: victim.user.id, deviceId, issuedAt: Math.floor(Date.now() / 1000) + 1 },
          clusterSecret,
          'djb2',
        );
      const refused = async (deviceId: number, token: string) => {
        const client = new RelayClient(node.url);
        clients.push(client);
        expect(await client.join(room, deviceId, token)).toMatchObject({
          type: 'error',
          code: 'auth_failed',
        });
        expect((await client.waitClosed()).code).toBe(4001);
      };

      await refused(victim.device.id, forge(victim.device.id));
      await refused(spare.device.id + 1000, forge(spare.device.id + 1000));
      await joined(node.url, room, victim.device.id, victim.deviceToken);

      // The auth process is gone; a NATS client without the secret answers in its place with
      // the digest of a forged token: refused. It was asked with the relay credential.
      // A NATS client without the secret gets no answer from the auth process.
      const impostor = await connect({ servers: natsUrl });
      const ask = (credential: string) =>
        impostor.request(
          deviceCheckSubject,
          JSON.stringify({ deviceId: victim.device.id, nonce: '0'.repeat(32), credential }),
          { timeout: 2_000 },
        );
      await expect(ask(signRelayCredential('not-the-secret-0123456789', 0))).rejects.toThrow();
      expect(
        (await ask(signRelayCredential(clusterSecret, Math.floor(Date.now() / 1000)))).json(),
      ).toMatchObject({ device: { userId: victim.user.id, tokenDigest: expect.any(String) } });

      await auth.process.stop('SIGKILL');
      const forged = forge(spare.device.id);
      const requests: unknown[] = [];
      impostor.subscribe(deviceCheckSubject, {
        callback: (_err, msg) => {
          requests.push(msg.json());
          msg.respond(
            JSON.stringify({
              device: { userId: victim.user.id, tokenDigest: sha256Hex(forged) },
              mac: '0'.repeat(64),
            }),
          );
        },
      });
      await impostor.flush();
      await refused(spare.device.id, forged);
      const health = await fetch(`${node.status}/health`).then((r) => r.json());
      // the forged answer counted with the records dropped for their seal
      expect(health).toMatchObject({ cluster: { rejected: 1 } });
      expect(requests).toMatchObject([
        {
          deviceId: spare.device.id,
          credential: expect.stringMatching(/^relay\.\d+\.[0-9a-f]{64}$/),
        },
      ]);
      // With nobody answering, signatures decide (as with auth.url while the auth service is
      // unreachable): the spare device's own token joins.
      await impostor.close();
      await joined(node.url, room, spare.device.id, spare.deviceToken);
    });
  },
);
