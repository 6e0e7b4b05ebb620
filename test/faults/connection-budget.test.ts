import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeConf, writeLoopbackRelayConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { getFrom, slowConnections } from '../helpers/slow-connections.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'connection-budget-secret-0123456789';
const dirs: string[] = [];
const floods = [slowConnections(), slowConnections()];
const silent: Socket[] = [];
const hosts: HostProcess[] = [];
const clients: RelayClient[] = [];

afterAll(async () => {
  for (const flood of floods) flood.closeAll();
  for (const socket of silent) socket.destroy();
  for (const client of clients) client.terminate();
  for (const host of hosts) await host.stop('SIGKILL').catch(() => null);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A host process allowed 400 descriptors (its budget of untrusted connections: 200). */
async function limitedHost(args: string[], write: (dir: string) => void): Promise<HostProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-budget-'));
  dirs.push(dir);
  write(dir);
  const host = await startHostProcess(args, dir, {
    wrapper: ['prlimit', '--nofile=400:400'],
    env: { LOG_LEVEL: 'debug' },
  });
  hosts.push(host);
  return host;
}

/**
 * 60 addresses (127.0.0.10 to 127.0.0.69) × 8 unfinished requests to `port`, each address below
 * its own limit, 480 in all: more than the process's 400 descriptors allow.
 */
async function spreadFlood(
  slow: ReturnType<typeof slowConnections>,
  port: number,
  head: string,
): Promise<void> {
  for (let a = 10; a < 70; a++) {
    await Promise.all(Array.from({ length: 8 }, () => slow.open(port, `127.0.0.${a}`, head)));
  }
}

const upgradeHead = 'GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nX-Slow: ';
const requestHead = 'GET /health HTTP/1.1\r\nHost: host\r\nX-Slow: ';

const descriptors = (host: HostProcess) => readdirSync(`/proc/${host.child.pid}/fd`).length;
/** The debug line of the budget's size at start. */
const budgetLine = (host: HostProcess) =>
  JSON.parse(host.stderr.find((line) => line.includes('connection budget')) ?? '{}');
const loggedEmfile = (host: HostProcess) =>
  [...host.stdout, ...host.stderr].some((line) => line.includes('EMFILE'));

describe('slow connections from many addresses under a descriptor limit', () => {
  it('480 unfinished upgrades over 60 addresses keep no client of another address from joining', async () => {
    const slow = floods[0] as ReturnType<typeof slowConnections>;
    const relay = await limitedHost(['relay'], (dir) => writeLoopbackRelayConf(dir, secret));
    const url = new URL(await relay.url('relay'));
    await spreadFlood(slow, Number(url.port), upgradeHead);
    expect(descriptors(relay)).toBeLessThan(400);

    const client = new RelayClient(url.href, { ws: { localAddress: '127.0.0.200' } });
    clients.push(client);
    const room = createRoomId(1, secret);
    const token = signDeviceToken(
      { userId: 1, deviceId: 1, issuedAt: Math.floor(Date.now() / 1000) },
      secret,
      'hmac-sha256',
    );
    expect(await client.join(room, 1, token)).toMatchObject({ type: 'joined' });
    // the budget (half the 400 descriptors) holds, the rest of the flood was closed
    await eventually(() => slow.stillOpen().length <= 200, 'evicted connections closed');
    expect(budgetLine(relay)).toMatchObject({ descriptorLimit: 400, connectionBudget: 200 });
    expect(descriptors(relay)).toBeLessThan(300);
    expect(loggedEmfile(relay)).toBe(false);
  }, 60_000);

  it('480 on the auth port and 480 on the relay port, one budget: both still answer another address', async () => {
    const slow = floods[1] as ReturnType<typeof slowConnections>;
    const host = await limitedHost(['--headless'], (dir) => {
      writeConf(dir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', TLS: 'off' });
      writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
    });
    const auth = new URL(await host.url('auth'));
    const relay = new URL(await host.url('relay'));
    await spreadFlood(slow, Number(auth.port), requestHead);
    await spreadFlood(slow, Number(relay.port), upgradeHead);
    expect(descriptors(host)).toBeLessThan(400);

    expect((await getFrom(`${auth.origin}/health`, '127.0.0.200')).status).toBe(200);
    const client = new RelayClient(relay.href, { ws: { localAddress: '127.0.0.201' } });
    clients.push(client);
    // a token the auth database does not know: answered, which is what counts here
    const answer = await client.join(createRoomId(1, secret), 1, 'not-a-token');
    expect(answer).toMatchObject({ type: 'error' });
    // one budget for both ports: 200 held in all, not 200 each
    await eventually(() => slow.stillOpen().length <= 200, 'evicted connections closed');
    expect(descriptors(host)).toBeLessThan(300);
    expect(loggedEmfile(host)).toBe(false);
  }, 60_000);

  it('600 connections from one address that never read their 429 keep no client of another address out', async () => {
    const relay = await limitedHost(['relay'], (dir) => writeLoopbackRelayConf(dir, secret));
    const url = new URL(await relay.url('relay'));
    // past the address's 32, each is answered 429 and held until it closes: this client never
    // reads the answer, so the relay holds each a second unless the budget closes it earlier
    const open = async () => {
      const socket = connect({
        port: Number(url.port),
        host: '127.0.0.1',
        localAddress: '127.0.0.7',
      });
      silent.push(socket);
      socket.on('error', () => {});
      socket.pause();
      await once(socket, 'connect');
      socket.write(upgradeHead);
    };
    for (let i = 0; i < 600; i += 20) await Promise.all(Array.from({ length: 20 }, open));
    expect(descriptors(relay)).toBeLessThan(300);

    const client = new RelayClient(url.href, { ws: { localAddress: '127.0.0.200' } });
    clients.push(client);
    const token = signDeviceToken(
      { userId: 1, deviceId: 1, issuedAt: Math.floor(Date.now() / 1000) },
      secret,
      'hmac-sha256',
    );
    expect(await client.join(createRoomId(1, secret), 1, token)).toMatchObject({ type: 'joined' });
    expect(loggedEmfile(relay)).toBe(false);
  }, 60_000);
});
