import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeConf, writeLoopbackRelayConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { processScope } from '../helpers/process-scope.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'process-test-secret-0123456789abcdef';
const { tempDir, start, connect } = processScope('relay-process-');

const token = (userId: number, deviceId: number, withSecret = secret) =>
  signDeviceToken(
    { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) },
    withSecret,
    'hmac-sha256',
  );

async function committed(statusUrl: string, count: number): Promise<void> {
  await eventually(
    async () =>
      (await (await fetch(`${statusUrl}/metrics`)).text()).includes(
        `relay_buffer_messages ${count}\n`,
      ),
    `${count} buffered messages committed`,
    5_000,
  );
}

describe('relay process: bin/sync-host relay', () => {
  function relayDir(): string {
    const dir = tempDir();
    writeLoopbackRelayConf(dir, secret);
    return dir;
  }

  it.each([
    ['SIGTERM', 0],
    ['SIGKILL', null],
  ] as const)(
    'delivers messages buffered before a %s after the restart',
    async (signal, exitCode) => {
      const dir = relayDir();
      const room = createRoomId(1, secret);
      let relay = await start(['relay'], dir);
      let url = await relay.url('relay');
      const statusUrl = await relay.url('status');
      const host = connect(url);
      expect(await host.join(room, 1, token(1, 1))).toMatchObject({ role: 'host' });
      const member = connect(url);
      expect(await member.join(room, 2, token(1, 2))).toMatchObject({ role: 'member' });
      await host.next('presence');
      member.terminate();
      await host.next('presence');
      for (let n = 1; n <= 20; n++) host.send({ to: n % 2 ? 2 : 'broadcast', payload: { n } });
      await host.sync();
      await committed(statusUrl, 20);

      expect(await relay.stop(signal)).toBe(exitCode);
      if (signal === 'SIGTERM') expect((await host.waitClosed()).code).toBe(1001);
      relay = await start(['relay'], dir);
      url = await relay.url('relay');
      const back = connect(url);
      const joined = await back.join(room, 2, token(1, 2));
      expect(joined).toMatchObject({ type: 'joined', buffered: 20, gap: false });
      const got: unknown[] = [];
      for (let i = 0; i < 20; i++) got.push((await back.message()).payload);
      expect(got).toEqual(Array.from({ length: 20 }, (_, i) => ({ n: i + 1 })));
      // the host was connected when the relay went down: it is buffered for as well
      back.send({ to: 1, payload: { after: 'restart' } });
      await back.sync();
      const hostBack = connect(url);
      expect(await hostBack.join(room, 1, token(1, 1))).toMatchObject({
        role: 'member',
        buffered: 1,
      });
    },
  );

  it('exits 0 within 5 s of SIGTERM with clients connected', async () => {
    const relay = await start(['relay'], relayDir());
    const url = await relay.url('relay');
    const room = createRoomId(3, secret);
    for (let d = 1; d <= 5; d++)
      expect(await connect(url).join(room, d, token(3, d))).toMatchObject({ type: 'joined' });
    const started = Date.now();
    expect(await relay.stop('SIGTERM')).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

/** A user enrolled through the real auth API: two device tokens and a project room. */
async function enrol(auth: HostProcess, authUrl: string, email: string) {
  const device = async (name: string) => {
    const before = auth.stdout.length;
    await fetch(`${authUrl}/auth/login?email=${encodeURIComponent(email)}`);
    await eventually(() =>
      auth.stdout.slice(before).some((l) => l.startsWith(`[dev] Magic link token for ${email}:`)),
    );
    const line = auth.stdout
      .slice(before)
      .find((l) => l.startsWith(`[dev] Magic link token for ${email}:`))!;
    const link = line.split(': ').at(-1)!;
    const response = await fetch(
      `${authUrl}/auth/verify?token=${link}&deviceName=${name}&platform=linux`,
    );
    expect(response.status).toBe(200);
    return (await response.json()) as {
      deviceToken: string;
      device: { id: number };
      user: { id: number };
    };
  };
  const first = await device('first');
  const second = await device('second');
  const project = await fetch(`${authUrl}/auth/project`, {
    method: 'POST',
    headers: { authorization: `Bearer ${first.deviceToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ projectKey: `key-${email}`, name: 'Project' }),
  });
  expect(project.status).toBeLessThan(300);
  const { project: record } = (await project.json()) as { project: { roomId: string } };
  return { first, second, room: record.roomId };
}

function authConf(dir: string, authSecret: string): void {
  writeConf(dir, 'auth.conf', {
    AUTH_SECRET: authSecret,
    PORT: 0,
    BIND: '127.0.0.1',
    MDNS: 'off',
    DEFAULT_TIER: 'pro',
    DATA_DIR: './data',
    TLS: 'off',
  });
}

describe('relay with the auth service in separate processes', () => {
  let auth: HostProcess;
  let authUrl: string;
  let user: Awaited<ReturnType<typeof enrol>>;

  beforeAll(async () => {
    const dir = tempDir();
    authConf(dir, secret);
    auth = await startHostProcess(['auth'], dir);
    authUrl = await auth.url('auth');
    user = await enrol(auth, authUrl, 'separate@example.com');
  }, 40_000);

  afterAll(async () => {
    await auth.stop('SIGTERM');
  });

  it('admits a device with a token from the auth service when both have the same secret', async () => {
    const dir = tempDir();
    writeConf(dir, 'relay.conf', {
      'auth.secret': secret,
      'ws.port': 0,
      'status.port': 0,
      bind: '127.0.0.1',
    });
    const relay = await start(['relay'], dir);
    const client = connect(await relay.url('relay'));
    const joined = await client.join(user.room, user.first.device.id, user.first.deviceToken);
    expect(joined).toMatchObject({ type: 'joined', role: 'host', device: user.first.device.id });
  });

  it('refuses that token with auth_failed and 4001 when the relay has another secret', async () => {
    const dir = tempDir();
    writeConf(dir, 'relay.conf', {
      'auth.secret': 'a-different-secret-0123456789abcdef',
      'ws.port': 0,
      'status.port': 0,
      bind: '127.0.0.1',
    });
    const relay = await start(['relay'], dir);
    const client = connect(await relay.url('relay'));
    expect(
      await client.join(user.room, user.first.device.id, user.first.deviceToken),
    ).toMatchObject({
      type: 'error',
      code: 'auth_failed',
    });
    expect((await client.waitClosed()).code).toBe(4001);
  });
});

describe('relay co-hosted with the auth service (--headless)', () => {
  it('closes the connections of a device deleted through the auth API with 4003 at once', async () => {
    const dir = tempDir();
    authConf(dir, secret);
    writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0, 'sqlite.path': './relay.db' });
    const host = await start(['--headless'], dir);
    const authUrl = await host.url('auth');
    const relayUrl = (await host.url('relay')).replace(/\/\/[^:/]+:/, '//127.0.0.1:');
    const user = await enrol(host, authUrl, 'cohosted@example.com');
    const first = connect(relayUrl);
    expect(await first.join(user.room, user.first.device.id, user.first.deviceToken)).toMatchObject(
      { role: 'host' },
    );
    const second = connect(relayUrl);
    expect(
      await second.join(user.room, user.second.device.id, user.second.deviceToken),
    ).toMatchObject({ role: 'member' });
    const deleted = await fetch(`${authUrl}/auth/device/${user.second.device.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${user.first.deviceToken}` },
    });
    expect(deleted.status).toBe(204);
    expect((await second.waitClosed(2_000)).code).toBe(4003);
    expect(await first.take((f) => f.type === 'presence' && f.state === 'left')).toMatchObject({
      device: user.second.device.id,
    });
    const retry = connect(relayUrl);
    expect(
      await retry.join(user.room, user.second.device.id, user.second.deviceToken),
    ).toMatchObject({
      code: 'auth_failed',
    });
  });
});
