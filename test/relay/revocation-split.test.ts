import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import type { TokenSignature } from '../../server/config/common.ts';
import { createRoomId, signDeviceToken, signRelayCredential } from '../../server/tokens.ts';
import { createCliRunner } from '../helpers/cli-process.ts';
import { writeConf } from '../helpers/configs.ts';
import type { HostProcess } from '../helpers/host-process.ts';
import { freePort } from '../helpers/ports.ts';
import { processScope } from '../helpers/process-scope.ts';

const secret = 'split-revocation-secret-0123456789abcdef';
const scope = processScope('sync-host-split-');
const runner = createCliRunner();
afterAll(() => runner.killAll());
/** Starting processes takes long on a loaded 2-core machine; these tests start several. */
const slow = { timeout: 120_000 };

interface Auth {
  process: HostProcess;
  url: string;
  signIn(email: string, deviceName: string): Promise<Device>;
}

interface Device {
  userId: number;
  deviceId: number;
  deviceToken: string;
}

/** `sync-host auth` on SQLite in `dir` (its auth.db is `dir/data/auth.db` unless `db` says otherwise). */
async function startAuth(
  dir: string,
  conf: { port?: number; signature?: TokenSignature; db?: string } = {},
): Promise<Auth> {
  const { process, url } = await scope.startAuth(dir, {
    PORT: conf.port ?? 0,
    AUTH_SECRET: secret,
    TOKEN_SIGNATURE: conf.signature ?? 'hmac-sha256',
    ...(conf.db === undefined ? {} : { DB_PATH: conf.db }),
  });
  return {
    process,
    url,
    async signIn(email, deviceName) {
      const client = createAuthClient({ authUrl: url });
      await client.requestLogin(email);
      const signed = await client.signIn(await process.magicToken(email), {
        deviceName,
        platform: 'test',
      });
      return {
        userId: signed.user.id,
        deviceId: signed.device.id,
        deviceToken: signed.deviceToken,
      };
    },
  };
}

/** `sync-host relay` following the auth service at `authUrl`. */
async function startRelay(authUrl: string, signature: TokenSignature = 'hmac-sha256') {
  const dir = scope.tempDir();
  writeConf(dir, 'relay.conf', {
    'auth.secret': secret,
    'auth.url': authUrl,
    'auth.tokenSignature': signature,
    'sqlite.path': './relay.db',
    'ws.port': 0,
    'status.port': 0,
    bind: '127.0.0.1',
  });
  const process = await scope.start(['relay'], dir);
  return { process, url: await process.url('relay') };
}

async function joined(relayUrl: string, room: string, device: Device) {
  const client = scope.connect(relayUrl);
  expect(await client.join(room, device.deviceId, device.deviceToken)).toMatchObject({
    type: 'joined',
  });
  return client;
}

async function refused(relayUrl: string, room: string, deviceId: number, token: string) {
  const client = scope.connect(relayUrl);
  expect(await client.join(room, deviceId, token)).toMatchObject({
    type: 'error',
    code: 'auth_failed',
  });
  expect((await client.waitClosed()).code).toBe(4001);
}

const deleteDevice = (authUrl: string, by: Device, deviceId: number) =>
  createAuthClient({ authUrl, deviceToken: by.deviceToken }).deleteDevice(deviceId);

describe('a relay running as its own process, with auth.url', () => {
  it(
    'closes a device deleted at the auth service with 4003 within 5 s and refuses its old token, also on a relay started afterwards',
    slow,
    async () => {
      const auth = await startAuth(scope.tempDir());
      const relay = await startRelay(auth.url);
      const keeper = await auth.signIn('split@example.com', 'keeper');
      const doomed = await auth.signIn('split@example.com', 'doomed');
      const room = createRoomId(keeper.userId, secret);
      const stays = await joined(relay.url, room, keeper);
      const goes = await joined(relay.url, room, doomed);

      await deleteDevice(auth.url, keeper, doomed.deviceId);
      expect((await goes.waitClosed(5_000)).code).toBe(4003);
      await refused(relay.url, room, doomed.deviceId, doomed.deviceToken);
      // the other device of the user stays
      await stays.sync();
      expect(stays.closeInfo).toBeUndefined();

      // A relay started afresh after the deletion (empty relay.db) refuses the old token too.
      const fresh = await startRelay(auth.url);
      await refused(fresh.url, room, doomed.deviceId, doomed.deviceToken);
      await joined(fresh.url, room, keeper);
    },
  );

  it(
    'catches up on a deletion made while it could not reach the auth service, and closes the device',
    slow,
    async () => {
      const dir = scope.tempDir();
      const port = await freePort();
      const first = await startAuth(dir, { port });
      const authUrl = `http://127.0.0.1:${port}`;
      const relay = await startRelay(authUrl);
      const keeper = await first.signIn('resume@example.com', 'keeper');
      const doomed = await first.signIn('resume@example.com', 'doomed');
      const room = createRoomId(keeper.userId, secret);
      const client = await joined(relay.url, room, doomed);

      // The auth service stops; another auth process on the same database deletes the device.
      expect(await first.process.stop('SIGTERM')).toBe(0);
      const other = await startAuth(scope.tempDir(), { db: join(dir, 'data', 'auth.db') });
      await deleteDevice(other.url, keeper, doomed.deviceId);
      expect(await other.process.stop('SIGTERM')).toBe(0);
      await client.sync();
      expect(client.closeInfo).toBeUndefined();

      // The auth service comes back where the relay expects it: the relay asks for what it missed.
      await startAuth(dir, { port });
      expect((await client.waitClosed(30_000)).code).toBe(4003);
      await refused(relay.url, room, doomed.deviceId, doomed.deviceToken);
    },
  );

  it(
    'refuses forged djb2 tokens: a device id never issued, a deleted device, another user’s room',
    slow,
    async () => {
      const auth = await startAuth(scope.tempDir(), { signature: 'djb2' });
      const relay = await startRelay(auth.url, 'djb2');
      const mine = await auth.signIn('attacker@example.com', 'mine');
      const spare = await auth.signIn('attacker@example.com', 'spare');
      const victim = await auth.signIn('victim@example.com', 'victim');
      const myRoom = createRoomId(mine.userId, secret);
      const victimRoom = createRoomId(victim.userId, secret);
      // What someone who recovered the djb2 key state from one token can sign.
      const forge = (userId: number, deviceId: number) =>
        signDeviceToken(
          { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) + 1 },
          secret,
          'djb2',
        );

      await joined(relay.url, myRoom, mine);
      await refused(
        relay.url,
        myRoom,
        victim.deviceId + 1000,
        forge(mine.userId, victim.deviceId + 1000),
      );
      await deleteDevice(auth.url, mine, spare.deviceId);
      await refused(relay.url, myRoom, spare.deviceId, forge(mine.userId, spare.deviceId));
      await refused(relay.url, victimRoom, victim.deviceId, forge(victim.userId, victim.deviceId));
      await refused(relay.url, victimRoom, mine.deviceId, forge(victim.userId, mine.deviceId));
      // the victim's own token still works
      await joined(relay.url, victimRoom, victim);
    },
  );
});

describe('the relay feed of the auth service', () => {
  it(
    'answers only a credential made with the shared secret, and checks its query',
    slow,
    async () => {
      const auth = await startAuth(scope.tempDir());
      const now = Math.floor(Date.now() / 1000);
      const get = (path: string, credential?: string) =>
        fetch(`${auth.url}${path}`, {
          headers: credential === undefined ? {} : { authorization: `Bearer ${credential}` },
        });
      const good = signRelayCredential(secret, now);
      const unauthorized = {
        error: { code: 'unauthorized', message: 'missing or invalid relay credential' },
      };
      for (const credential of [
        undefined,
        signRelayCredential('another-secret-0123456789abcdef', now),
        signRelayCredential(secret, now - 3600),
        good.replace(/.$/, (c) => (c === '0' ? '1' : '0')),
        'relay',
      ]) {
        for (const path of ['/relay/revocations?since=0', '/relay/devices/1']) {
          const res = await get(path, credential);
          expect(res.status, `${path} with ${credential}`).toBe(401);
          expect(await res.json()).toEqual(unauthorized);
        }
      }
      const device = await auth.signIn('feed@example.com', 'one');
      const found = await get(`/relay/devices/${device.deviceId}`, good);
      expect(found.status).toBe(200);
      expect(await found.json()).toMatchObject({
        device: { id: device.deviceId, userId: device.userId },
      });
      for (const path of [
        '/relay/devices/abc',
        '/relay/revocations',
        '/relay/revocations?since=x',
      ]) {
        const res = await get(path, good);
        expect(res.status, path).toBe(400);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'invalid_request',
        );
      }
      expect((await get('/relay/devices/999999', good)).status).toBe(404);
      const empty = await get('/relay/revocations?since=0', good);
      expect(await empty.json()).toEqual({ revocations: [], next: 0, reset: false });
    },
  );
});

describe('a relay with no revocation path', () => {
  it(
    'refuses djb2 at start with one line, and warns in one line with hmac-sha256',
    slow,
    async () => {
      const dir = scope.tempDir();
      const conf = {
        'auth.secret': secret,
        'sqlite.path': './relay.db',
        'ws.port': 0,
        'status.port': 0,
        bind: '127.0.0.1',
      };
      writeConf(dir, 'relay.conf', { ...conf, 'auth.tokenSignature': 'djb2' });
      const djb2 = await runner.cli(['relay', '--config-dir', dir], dir);
      expect(djb2.code).toBe(2);
      const lines = djb2.stderr.split('\n').filter((line) => line !== '');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^sync-host: relay\.conf.*auth\.tokenSignature.*auth\.url/);

      writeConf(dir, 'relay.conf', conf);
      const relay = await scope.start(['relay'], dir);
      await relay.url('relay');
      const warnings = relay.stderr.filter((line) =>
        line.includes('deleted devices keep relay access'),
      );
      expect(warnings).toHaveLength(1);
    },
  );
});
