import { afterEach, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import type { SignedIn } from '../../client/auth-types.ts';
import type { Host } from '../../server/host.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import { processScope } from '../helpers/process-scope.ts';
import { startSkewedRelay } from '../helpers/skewed-relay.ts';

const secret = 'auth-clock-secret-0123456789abcdef';
const scope = processScope('sync-host-auth-clock-');
const hosts: Host[] = [];
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.close();
});

/**
 * A relay with `auth.url` whose clock is `offsetMs` off (an injected clock), and `sync-host auth`
 * on SQLite: past the 300 s a relay credential may differ from the auth service's clock.
 */
async function skewedRelay(offsetMs: number) {
  const authDir = scope.tempDir();
  writeConf(authDir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', AUTH_SECRET: secret });
  const auth = await scope.start(['auth'], authDir);
  const authUrl = await auth.url('auth');
  const dir = scope.tempDir();
  writeConf(dir, 'relay.conf', {
    'auth.secret': secret,
    'auth.url': authUrl,
    'sqlite.path': './relay.db',
    'ws.port': 0,
    'status.port': 0,
    bind: '127.0.0.1',
  });
  const { host, lines } = await startSkewedRelay(dir, offsetMs);
  hosts.push(host);
  const signIn = async (deviceName: string): Promise<SignedIn> => {
    const client = createAuthClient({ authUrl });
    await client.requestLogin('clock@example.org');
    return client.signIn(await auth.magicToken('clock@example.org'), { deviceName, platform: 't' });
  };
  return { authUrl, relayUrl: host.urls.relay ?? '', lines, signIn };
}

describe('a relay with auth.url whose clock is wrong by more than 300 s', () => {
  for (const [offsetMs, word] of [
    [-400_000, 'behind'],
    [400_000, 'ahead of'],
  ] as const) {
    it(`${word} the auth service: refuses a never-issued device, closes a deleted one (4003) and says the offset`, {
      timeout: 120_000,
    }, async () => {
      const { authUrl, relayUrl, lines, signIn } = await skewedRelay(offsetMs);
      const keeper = await signIn('keeper');
      const doomed = await signIn('doomed');
      const room = createRoomId(keeper.user.id, secret);
      // a token made with the secret for a device the auth service never issued
      const ghost = doomed.device.id + 1000;
      const claims = { userId: keeper.user.id, deviceId: ghost, issuedAt: keeper.device.id };
      const forged = signDeviceToken(claims, secret, 'hmac-sha256');
      const refused = scope.connect(relayUrl);
      expect(await refused.join(room, ghost, forged)).toMatchObject({ code: 'auth_failed' });

      const goes = scope.connect(relayUrl);
      expect(await goes.join(room, doomed.device.id, doomed.deviceToken)).toMatchObject({
        type: 'joined',
      });
      const owner = createAuthClient({ authUrl, deviceToken: keeper.deviceToken });
      await owner.deleteDevice(doomed.device.id);
      expect((await goes.waitClosed(5_000)).code).toBe(4003);

      const said = lines.filter((line) => line.includes('clock is'));
      expect(said.join('\n')).toMatch(
        new RegExp(`clock is (39\\d|40\\d) s ${word} the auth service`),
      );
      expect(lines.filter((line) => line.includes('auth.secret differs'))).toEqual([]);
    });
  }
});
