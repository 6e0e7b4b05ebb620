import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setSubscription } from '../../server/db/users.ts';
import { type Host, startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';
import { type AuthHarness, type SignedIn, startAuth } from '../helpers/auth-harness.ts';
import { loadTestConfig } from '../helpers/configs.ts';
import { dbTargets } from '../helpers/databases.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { listedProject, share, type TeamDevice } from '../helpers/team.ts';

const sqlite = (await dbTargets()).find((target) => target.name === 'sqlite');

/** A relay of its own process (`startHost` in relay mode) following the auth service at `auth.url`. */
describe.skipIf(sqlite === undefined)('a relay with auth.url admits and drops members', () => {
  let auth: AuthHarness;
  const dirs: string[] = [];
  const hosts: Host[] = [];
  const clients: RelayClient[] = [];
  beforeAll(async () => {
    auth = await startAuth(sqlite as NonNullable<typeof sqlite>, { admin: true });
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    for (const host of hosts.splice(0)) await host.close();
  });
  afterAll(async () => {
    await auth?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startRelay(dir: string): Promise<string> {
    const config = loadTestConfig(dir, {
      auth: { DATA_DIR: join(dir, 'data') },
      relay: {
        'auth.secret': auth.secret,
        'auth.url': auth.url,
        'sqlite.path': join(dir, 'relay.db'),
        'ws.port': 0,
        'status.port': 0,
        bind: '127.0.0.1',
      },
    });
    const host = await startHost({
      mode: 'relay',
      config,
      logger: createLogger('silent'),
      print: () => {},
      now: () => auth.clock.now,
    });
    hosts.push(host);
    return host.urls.relay ?? '';
  }

  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'sync-host-members-'));
    dirs.push(dir);
    return dir;
  };
  const device = (signed: SignedIn): TeamDevice => ({
    userId: signed.user.id,
    deviceId: signed.device.id,
    deviceToken: signed.deviceToken,
  });

  async function team(tag: string) {
    const owner = device(await auth.signIn(`owner-${tag}@example.com`));
    const member = device(await auth.signIn(`member-${tag}@example.com`));
    await setSubscription(auth.server.db, owner.userId, 'team', null, new Date(auth.clock.now));
    const res = await auth.request('POST', '/auth/project', {
      token: owner.deviceToken,
      body: { projectKey: 'shared', name: 'shared' },
    });
    const { project } = (await res.json()) as { project: { id: number; roomId: string } };
    await share(auth.url, owner, project.id, `member-${tag}@example.com`, 'editor');
    const { grant } = await listedProject(auth.url, member, project.id);
    return { owner, member, project, grant };
  }

  async function joinAs(url: string, who: TeamDevice, room: string, grant: string | undefined) {
    const client = new RelayClient(url);
    clients.push(client);
    const frame = await client.joinWithGrant(room, who.deviceId, who.deviceToken, grant);
    return { client, frame };
  }

  const removeMember = async (owner: TeamDevice, projectId: number, userId: number) => {
    const res = await auth.request('DELETE', `/auth/project/${projectId}/members/${userId}`, {
      token: owner.deviceToken,
    });
    expect(res.status).toBe(204);
  };

  it('closes a removed member’s connections with 4003 within 5 s, and refuses its grant after', async () => {
    const url = await startRelay(tempDir());
    const { owner, member, project, grant } = await team('feed');
    const ownerSide = await joinAs(url, owner, project.roomId, undefined);
    const memberSide = await joinAs(url, member, project.roomId, grant);
    expect(memberSide.frame).toMatchObject({ type: 'joined' });
    const started = Date.now();
    await removeMember(owner, project.id, member.userId);
    expect((await memberSide.client.waitClosed(5_000)).code).toBe(4003);
    expect(Date.now() - started).toBeLessThan(5_000);
    const again = await joinAs(url, member, project.roomId, grant);
    expect(again.frame).toMatchObject({ type: 'error', code: 'auth_failed' });
    await ownerSide.client.sync();
    expect(ownerSide.client.socket.readyState).toBe(ownerSide.client.socket.OPEN);
  });

  it('refuses the grant of a membership removed while the relay was down', async () => {
    const dir = tempDir();
    const { owner, member, project, grant } = await team('down');
    const url = await startRelay(dir);
    expect((await joinAs(url, member, project.roomId, grant)).frame).toMatchObject({
      type: 'joined',
    });
    for (const client of clients.splice(0)) client.terminate();
    await hosts.splice(0)[0]?.close();
    await removeMember(owner, project.id, member.userId);
    const restarted = await startRelay(dir);
    const refused = await (async () => {
      // the feed is read at start; until then the grant's signature alone would decide
      for (let tries = 0; tries < 50; tries++) {
        const attempt = await joinAs(restarted, member, project.roomId, grant);
        if (attempt.frame.type === 'error') return attempt.frame;
        attempt.client.terminate();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return undefined;
    })();
    expect(refused).toMatchObject({ type: 'error', code: 'auth_failed' });
  });
});
