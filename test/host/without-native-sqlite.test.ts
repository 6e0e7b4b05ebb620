import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import type { HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { processScope } from '../helpers/process-scope.ts';
import { treeWithoutNativeSqlite } from '../helpers/program-copy.ts';

const secret = 'no-native-sqlite-secret-0123456789';
const { tempDir, start, connect, stopAll } = processScope('sync-host-wasm-');

/** Two devices of one user in one room: the sender (index 0) and the one that drops (index 1). */
interface Devices {
  room: string;
  ids: [number, number];
  tokens: [string, string];
}

/** A relay on its own trusts any token signed with the shared secret. */
async function selfSigned(): Promise<Devices> {
  const token = (deviceId: number) =>
    signDeviceToken(
      { userId: 1, deviceId, issuedAt: Math.floor(Date.now() / 1000) },
      secret,
      'hmac-sha256',
    );
  return { room: createRoomId(1, secret), ids: [1, 2], tokens: [token(1), token(2)] };
}

/** A co-hosted relay checks tokens against the auth database: sign in for real. */
async function signedIn(host: HostProcess): Promise<Devices> {
  const auth = createAuthClient({ authUrl: await host.url('auth') });
  const email = 'wasm@example.com';
  const device = async (name: string) => {
    await auth.requestLogin(email);
    return auth.signIn(await host.magicToken(email), { deviceName: name, platform: 'test' });
  };
  const first = await device('sender');
  const second = await device('away');
  return {
    room: createRoomId(first.user.id, secret),
    ids: [first.device.id, second.device.id],
    tokens: [first.deviceToken, second.deviceToken],
  };
}

/**
 * Device 2 drops, device 1 sends it three messages, the host stops (SIGTERM) and starts again:
 * device 2's join gets the three, in order. Returns the first run's stderr lines.
 */
async function bufferedAcrossRestart(
  args: string[],
  dir: string,
  options: Parameters<typeof startHostProcess>[2],
  devicesOf: (host: HostProcess) => Promise<Devices>,
): Promise<string[]> {
  const first = await start(args, dir, options);
  const { room, ids, tokens } = await devicesOf(first);
  const url = await first.url('relay');
  const sender = connect(url);
  await sender.join(room, ids[0], tokens[0]);
  const away = connect(url);
  await away.join(room, ids[1], tokens[1]);
  await sender.next('presence');
  away.terminate();
  await sender.next('presence');
  for (let n = 1; n <= 3; n++) sender.send({ to: ids[1], payload: { n } });
  await sender.sync();
  expect(await first.stop('SIGTERM')).toBe(0);

  const second = await start(args, dir, options);
  const back = connect(await second.url('relay'));
  expect(await back.join(room, ids[1], tokens[1])).toMatchObject({
    type: 'joined',
    buffered: 3,
    gap: false,
  });
  for (let n = 1; n <= 3; n++) expect((await back.message()).payload).toEqual({ n });
  return first.stderr;
}

const engineWarning = (stderr: string[]) =>
  stderr
    .map((l) => JSON.parse(l) as { level: string; msg: string })
    .filter((l) => l.msg.startsWith('SQLite engine: sql.js'));

describe('the embedded databases without the native SQLite addon', () => {
  it('relay mode with SYNC_HOST_SQLITE_ENGINE=wasm: buffers on sql.js and delivers after a restart', async () => {
    const dir = tempDir('sync-host-wasm-relay-');
    writeConf(dir, 'relay.conf', {
      'auth.secret': secret,
      'ws.port': 0,
      'status.port': 0,
      bind: '127.0.0.1',
    });
    const stderr = await bufferedAcrossRestart(
      ['relay'],
      dir,
      { env: { SYNC_HOST_SQLITE_ENGINE: 'wasm' } },
      selfSigned,
    );
    expect(engineWarning(stderr)).toEqual([
      {
        level: 'warn',
        time: expect.any(String),
        msg: expect.stringMatching(
          /^SQLite engine: sql\.js \(WebAssembly; chosen by SYNC_HOST_SQLITE_ENGINE=wasm\): every commit .* rewrites its whole file/,
        ),
      },
    ]);
  }, 90_000);

  it('a tree where better-sqlite3 is not installed runs --headless (one warning) and auth, buffering across a restart', async () => {
    const tree = treeWithoutNativeSqlite(tempDir('sync-host-no-addon-'));
    const launcher = join(tree, 'bin', 'sync-host');
    const dir = tempDir('sync-host-no-addon-data-');
    writeConf(dir, 'auth.conf', {
      PORT: 0,
      MDNS: 'off',
      BIND: '127.0.0.1',
      AUTH_SECRET: secret,
      TLS: 'off',
    });
    writeConf(dir, 'relay.conf', { 'auth.secret': secret, 'ws.port': 0, 'status.port': 0 });
    const stderr = await bufferedAcrossRestart(['--headless'], dir, { launcher }, signedIn);
    const warnings = engineWarning(stderr);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toMatch(
      /better-sqlite3 cannot load here: Cannot find module 'better-sqlite3'/,
    );

    // The auth service alone on sql.js: a sign-in request is stored and answered.
    await stopAll('SIGTERM');
    const auth = await start(['auth'], dir, { launcher });
    const base = await auth.url('auth');
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const asked = await fetch(`${base}/auth/magic-link`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'wasm@example.com' }),
    });
    expect(asked.status).toBeLessThan(300);
    expect(engineWarning(auth.stderr)).toHaveLength(1);
  }, 90_000);
});
