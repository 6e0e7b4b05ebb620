import { afterAll, describe, expect, it } from 'vitest';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { authCall, listedProject, share, type TeamDevice } from '../helpers/team.ts';
import { ClusterProcesses } from './processes.ts';

const skip = natsSkipReason();

describe.skipIf(skip !== undefined)(
  `cluster: a project's members${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let nats: NatsServer | undefined;
    afterAll(async () => {
      for (const client of clients) client.terminate();
      await processes.dispose();
      await nats?.dispose();
    });

    async function joinAs(url: string, who: TeamDevice, room: string, grant?: string) {
      const client = new RelayClient(url);
      clients.push(client);
      return {
        client,
        frame: await client.joinWithGrant(room, who.deviceId, who.deviceToken, grant),
      };
    }

    it('admits a member on either node, and closes it on every node within 5 s once removed', {
      timeout: 90_000,
    }, async () => {
      nats = await startNatsServer();
      const [auth, nodeA, nodeB] = await Promise.all([
        // every user on team; nobody is the host's owner (who would be on pro)
        processes.authProcess(nats.url, {
          DEFAULT_TIER: 'team',
          OWNER_EMAIL: 'nobody@example.org',
        }),
        processes.relayNode(nats.url, 'node-a'),
        processes.relayNode(nats.url, 'node-b'),
      ]);
      const device = async (email: string, name: string): Promise<TeamDevice> => {
        const signed = await auth.signIn(email, name);
        return {
          userId: signed.user.id,
          deviceId: signed.device.id,
          deviceToken: signed.deviceToken,
        };
      };
      const owner = await device('owner@example.org', 'owner');
      const laptop = await device('member@example.org', 'laptop');
      const desktop = await device('member@example.org', 'desktop');
      const created = await authCall(auth.url, owner.deviceToken, 'POST', '/auth/project', {
        projectKey: 'shared',
        name: 'shared',
      });
      const project = (created.body as { project: { id: number; roomId: string } }).project;
      await share(auth.url, owner, project.id, 'member@example.org', 'editor');
      const { grant } = await listedProject(auth.url, laptop, project.id);

      const ownerOnA = await joinAs(nodeA.url, owner, project.roomId);
      const laptopOnA = await joinAs(nodeA.url, laptop, project.roomId, grant);
      const desktopOnB = await joinAs(nodeB.url, desktop, project.roomId, grant);
      expect(laptopOnA.frame).toMatchObject({ type: 'joined' });
      // the roles of devices on the other node too
      expect(desktopOnB.frame).toMatchObject({
        type: 'joined',
        roles: {
          [owner.deviceId]: 'owner',
          [laptop.deviceId]: 'editor',
          [desktop.deviceId]: 'editor',
        },
      });
      await ownerOnA.client.take(
        (frame) =>
          frame.type === 'presence' && frame.device === desktop.deviceId && frame.role === 'editor',
      );

      const removedAt = Date.now();
      const removed = await authCall(
        auth.url,
        owner.deviceToken,
        'DELETE',
        `/auth/project/${project.id}/members/${laptop.userId}`,
      );
      expect(removed.status).toBe(204);
      expect((await laptopOnA.client.waitClosed(5_000)).code).toBe(4003);
      expect((await desktopOnB.client.waitClosed(5_000)).code).toBe(4003);
      expect(Date.now() - removedAt).toBeLessThan(5_000);
      for (const url of [nodeA.url, nodeB.url]) {
        const again = await joinAs(url, desktop, project.roomId, grant);
        expect(again.frame).toMatchObject({ type: 'error', code: 'auth_failed' });
      }
      await ownerOnA.client.sync();
      expect(ownerOnA.client.closeInfo).toBeUndefined();
    });
  },
);
