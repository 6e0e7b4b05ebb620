import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClusterBroker } from '../../server/cluster/cluster-broker.ts';
import { createLogger } from '../../server/log.ts';
import { signRoomGrant } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();
const secret = 'join-revocation-race-secret-0123456789';

/**
 * A cluster node admits a join only once NATS answered (the roster is claimed there). A
 * membership removed or a device deleted while its join waits for that answer must not let the
 * connection in: it is closed with 4003 as soon as it is admitted. NATS is held still
 * (SIGSTOP) to keep the join waiting while the revocation comes.
 */
describe.skipIf(skip !== undefined)(
  `cluster: a revocation while a join waits for NATS${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let nats: NatsServer;
    let relay: RelayHarness;

    beforeAll(async () => {
      nats = await startNatsServer();
      const broker = createClusterBroker({
        urls: [nats.url],
        node: 'race-node',
        bufferWindowMs: 60_000,
        secret,
        logger: createLogger('silent'),
      });
      relay = await startRelayHarness({ secret, broker, store: null });
      // joins are refused with 1013 until the node is connected to NATS
      await eventually(
        async () => {
          const probe = await relay.client();
          const answer = await probe
            .join(relay.room(1), 1, relay.token(1, 1))
            .catch(() => undefined);
          probe.terminate();
          return answer?.type === 'joined' || undefined;
        },
        'the node taking joins',
        30_000,
      );
    }, 60_000);

    afterAll(async () => {
      if (nats?.pid !== undefined) process.kill(nats.pid, 'SIGCONT');
      await relay?.close();
      await nats?.dispose();
    });

    /** Runs `during` while NATS is stopped and a join sent before it waits for NATS. */
    async function joinWhileStopped(
      join: Record<string, unknown>,
      during: () => void,
    ): Promise<{ answer: Record<string, unknown>; code: number }> {
      const client = await relay.client();
      process.kill(nats.pid as number, 'SIGSTOP');
      try {
        client.send(join);
        // the node has the join by now, and waits for NATS
        await new Promise((resolve) => setTimeout(resolve, 300));
        during();
      } finally {
        process.kill(nats.pid as number, 'SIGCONT');
      }
      const answer = await client.take((f) => f.type === 'joined' || f.type === 'error', 20_000);
      const closed = await client.waitClosed(10_000);
      return { answer, code: closed.code };
    }

    it('closes a member whose membership ended while its join waited', async () => {
      const owner = 71;
      const member = 72;
      const room = relay.room(owner);
      // the owner is in the room already: the room is known on the node
      await relay.joined(room, owner, 1);
      const grant = signRoomGrant(secret, room, member, 5, 'editor');
      const { code } = await joinWhileStopped(
        { type: 'join', room, device: 2, token: relay.token(member, 2), grant },
        () => relay.relay.revokeMember(room, member, 5),
      );
      expect(code).toBe(4003);
      // and it stays out
      const again = await relay.client();
      again.send({ type: 'join', room, device: 2, token: relay.token(member, 2), grant });
      expect(await again.next('error')).toMatchObject({ code: 'auth_failed' });
    }, 60_000);

    it('closes a device deleted while its join waited', async () => {
      const user = 81;
      const room = relay.room(user);
      await relay.joined(room, user, 11);
      const { code } = await joinWhileStopped(
        { type: 'join', room, device: 12, token: relay.token(user, 12) },
        () => relay.relay.revokeDevice(12),
      );
      expect(code).toBe(4003);
      await eventually(
        () => !relay.relay.status().perRoom.some((r) => r.devices.includes('12')) || undefined,
        'the device gone from the room',
        5_000,
      );
    }, 60_000);
  },
);
