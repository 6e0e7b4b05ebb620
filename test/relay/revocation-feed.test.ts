import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRevocationPrune } from '../../server/auth/purges.ts';
import { type Host, startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';
import { createRoomId } from '../../server/tokens.ts';
import { type AuthHarness, adminToken, type SignedIn, startAuth } from '../helpers/auth-harness.ts';
import { captureLogger } from '../helpers/capture.ts';
import { loadTestConfig } from '../helpers/configs.ts';
import { dbTargets } from '../helpers/databases.ts';
import { type HttpProxy, startHttpProxy } from '../helpers/http-proxy.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';

const day = 24 * 60 * 60_000;
const sqlite = (await dbTargets()).find((target) => target.name === 'sqlite');

/**
 * A relay of its own process (`startHost` in relay mode) following an auth service through a
 * proxy the test controls, on the auth service's clock (the feed's credential carries the time).
 */
describe.skipIf(sqlite === undefined)('the revocation feed of a relay with auth.url', () => {
  let auth: AuthHarness;
  let proxy: HttpProxy;
  const dirs: string[] = [];
  const hosts: Host[] = [];
  const clients: RelayClient[] = [];
  beforeAll(async () => {
    auth = await startAuth(sqlite as NonNullable<typeof sqlite>, { admin: true });
    proxy = await startHttpProxy(auth.url);
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    for (const host of hosts.splice(0)) await host.close();
    proxy.restore();
  });
  afterAll(async () => {
    await proxy?.close();
    await auth?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startRelay(dir: string): Promise<{ host: Host; url: string }> {
    const config = loadTestConfig(dir, {
      auth: { DATA_DIR: join(dir, 'data') },
      relay: {
        'auth.secret': auth.secret,
        'auth.url': proxy.url,
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
    return { host, url: host.urls.relay ?? '' };
  }

  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'sync-host-feed-'));
    dirs.push(dir);
    return dir;
  };
  const savedCursor = (dir: string) => {
    const path = join(dir, 'relay-feed.json');
    return existsSync(path)
      ? (JSON.parse(readFileSync(path, 'utf8')) as { since: number }).since
      : undefined;
  };
  const deleteDevice = async (by: SignedIn, deviceId: number) => {
    const res = await auth.request('DELETE', `/auth/device/${deviceId}`, { token: by.deviceToken });
    expect(res.status).toBe(204);
  };
  /** The feed's cursor now: the sequence number of the latest deletion. */
  const latestSeq = async () => (await auth.server.service.revocationBounds()).latest;
  const join_ = async (url: string, room: string, device: SignedIn) => {
    const client = new RelayClient(url);
    clients.push(client);
    return { client, frame: await client.join(room, device.device.id, device.deviceToken) };
  };

  it('saves its cursor, resumes from it after a restart, and applies a deletion made while it was down', async () => {
    const dir = tempDir();
    const keeper = await auth.signIn('resume@example.com', 'keeper');
    const early = await auth.signIn('resume@example.com', 'early');
    const doomed = await auth.signIn('resume@example.com', 'doomed');
    const room = createRoomId(keeper.user.id, auth.secret);
    await startRelay(dir);
    await deleteDevice(keeper, early.device.id);
    const cursor = await latestSeq();
    await eventually(() => (savedCursor(dir) === cursor ? true : undefined), 'the saved cursor');
    await hosts.splice(0)[0]?.close();

    await deleteDevice(keeper, doomed.device.id);
    const asked = proxy.paths.length;
    const second = await startRelay(dir);
    expect(second.url).not.toBe('');
    const missed = await latestSeq();
    await eventually(() => (savedCursor(dir) === missed ? true : undefined), 'the new cursor');
    const feedRequests = proxy.paths.slice(asked).filter((p) => p.startsWith('/relay/revocations'));
    expect(feedRequests[0]).toMatch(new RegExp(`^/relay/revocations\\?since=${cursor}&`));

    // With the auth service out of reach the join check lets signatures decide: only the
    // revocation the restarted relay read from the feed refuses the deleted device now.
    proxy.cut();
    const refused = await join_(second.url, room, doomed);
    expect(refused.frame).toMatchObject({ type: 'error', code: 'auth_failed' });
    expect((await refused.client.waitClosed()).code).toBe(4001);
    expect((await join_(second.url, room, keeper)).frame).toMatchObject({ type: 'joined' });
  });

  it('checks its connected devices again when deletions it missed were pruned, and closes the deleted ones with 4003', async () => {
    const dir = tempDir();
    const keeper = await auth.signIn('pruned@example.com', 'keeper');
    const doomed = await auth.signIn('pruned@example.com', 'doomed');
    const later = await auth.signIn('pruned-later@example.com', 'later');
    const room = createRoomId(keeper.user.id, auth.secret);
    const relay = await startRelay(dir);
    const stays = await join_(relay.url, room, keeper);
    const goes = await join_(relay.url, room, doomed);
    expect(goes.frame).toMatchObject({ type: 'joined' });

    // Cut off for over a week: the deletion it missed is pruned, only a later one is kept.
    proxy.cut();
    await deleteDevice(keeper, doomed.device.id);
    auth.clock.advance(8 * day);
    const gone = await fetch(`${auth.url}/admin/api/users/${later.user.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(gone.status).toBeLessThan(300);
    const { logger } = captureLogger();
    const prune = startRevocationPrune({ db: auth.server.db, logger, now: () => auth.clock.now });
    expect(await prune.run()).toBeGreaterThanOrEqual(1);
    prune.stop();
    await goes.client.sync();
    expect(goes.client.closeInfo).toBeUndefined();

    // The feed answers again but device lookups do not: the check cannot be done, so the relay
    // keeps asking from the same cursor and keeps the device for now.
    const cursor = savedCursor(dir);
    const asked = proxy.paths.length;
    proxy.restore();
    proxy.cut('/relay/devices/');
    const since = new RegExp(`^/relay/revocations\\?since=${cursor ?? 0}&`);
    await eventually(
      () => (proxy.paths.slice(asked).filter((p) => since.test(p)).length >= 2 ? true : undefined),
      'the feed asked twice from the same cursor',
    );
    expect(proxy.paths.slice(asked).some((p) => p.startsWith('/relay/devices/'))).toBe(true);
    expect(savedCursor(dir)).toBe(cursor);
    await goes.client.sync();
    expect(goes.client.closeInfo).toBeUndefined();

    proxy.restore();
    expect((await goes.client.waitClosed(10_000)).code).toBe(4003);
    await eventually(
      async () => (savedCursor(dir) === (await latestSeq()) ? true : undefined),
      'the cursor past the reset',
    );
    await stays.client.sync();
    expect(stays.client.closeInfo).toBeUndefined();
  });
});
