import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { createSecureContext } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { createConnectionBudget } from '../../server/connection-budget.ts';
import { makeSelfSigned } from '../../server/tls/certificate.ts';
import type { TlsContextSource } from '../../server/tls/secure-port.ts';
import { RelayClient, upgradeStatus } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { getFrom } from '../helpers/slow-connections.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness;
const sockets: Socket[] = [];
const clients: RelayClient[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const client of clients.splice(0)) client.terminate();
  await harness.close();
});

/** A TCP connection to the relay that starts an upgrade request and never finishes it. */
async function halfOpen(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write('GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\n');
  return socket;
}

async function client(
  localAddress: string,
  headers: Record<string, string> = {},
): Promise<RelayClient> {
  const relayClient = new RelayClient(harness.wsUrl, { ws: { localAddress, headers } });
  clients.push(relayClient);
  await relayClient.opened;
  return relayClient;
}

/** A self-signed certificate for 127.0.0.1, as the host makes one. */
async function selfSigned(): Promise<TlsContextSource> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const key = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const pair = await makeSelfSigned(key, ['127.0.0.1'], Date.now());
  const context = createSecureContext({ cert: pair.cert, key: pair.key });
  return { context: () => context };
}

describe('connections that have not joined (relay.maxUnjoinedPerAddress)', () => {
  it('counts them at accept over TLS too (a socket that sends nothing), and no longer once joined', async () => {
    harness = await startRelayHarness({
      config: { maxUnjoinedPerAddress: 4 },
      tls: await selfSigned(),
    });
    const port = Number(new URL(harness.wsUrl).port);
    // four devices of this address joined over TLS: they no longer count
    for (let device = 1; device <= 4; device++) {
      const joined = new RelayClient(harness.wsUrl, { ws: { rejectUnauthorized: false } });
      clients.push(joined);
      await joined.opened;
      const frame = await joined.join(harness.room(1), device, harness.token(1, device));
      expect(frame).toMatchObject({ type: 'joined' });
    }
    const silent = async () => {
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => {});
      socket.resume(); // reads what it is sent, so that the server's end is seen
      await once(socket, 'connect');
      return socket;
    };
    const idle = [await silent(), await silent(), await silent(), await silent()];
    const fifth = await silent();
    let answered = '';
    fifth.on('data', (chunk: Buffer) => {
      answered += chunk.toString('latin1');
    });
    await eventually(() => fifth.destroyed || fifth.closed, 'the fifth closed at once', 5_000);
    expect(answered).toBe(''); // nothing in plain text on a TLS port
    expect(idle.every((socket) => !socket.closed)).toBe(true);
  });

  it('refuses the connection past the limit from one address with 429, not other addresses nor joined clients', async () => {
    harness = await startRelayHarness({ config: { maxUnjoinedPerAddress: 4 } });
    const port = Number(new URL(harness.wsUrl).port);
    const room = harness.room(1);
    // a device of this address that joined before the others came: it does not count
    const member = await client('127.0.0.1');
    expect(await member.join(room, 1, harness.token(1, 1))).toMatchObject({ type: 'joined' });

    // two upgrade requests that never finish and two upgraded sockets that never join
    await halfOpen(port);
    await halfOpen(port);
    const idle = [await client('127.0.0.1'), await client('127.0.0.1')];
    expect(await upgradeStatus(harness.wsUrl, '127.0.0.1')).toBe(429);

    // another address is not affected; the joined member keeps working
    const other = await client('127.0.0.2');
    expect(await other.join(room, 2, harness.token(1, 2))).toMatchObject({ type: 'joined' });
    other.send({ to: 1, payload: { still: 'here' } });
    expect((await member.message()).payload).toEqual({ still: 'here' });

    // one of the four joins: it no longer counts, so one more connection is let in
    expect(await idle[0]?.join(room, 3, harness.token(1, 3))).toMatchObject({ type: 'joined' });
    expect(await upgradeStatus(harness.wsUrl, '127.0.0.1')).toBe(101);
    const metrics = await (await fetch(`${harness.statusUrl}/metrics`)).text();
    expect(metrics).toContain('relay_unjoined_refused_total 1');
  });

  it('counts the clients behind a trusted proxy (TRUST_PROXY) by their forwarded address', async () => {
    harness = await startRelayHarness({
      config: { maxUnjoinedPerAddress: 2, trustProxy: ['127.0.0.5'] },
    });
    const viaProxy = (client: string) => ({ 'X-Forwarded-For': client });
    // two clients behind the proxy hold their address's two places
    await client('127.0.0.5', viaProxy('203.0.113.7'));
    await client('127.0.0.5', viaProxy('203.0.113.7'));
    expect(await upgradeStatus(harness.wsUrl, '127.0.0.5', viaProxy('203.0.113.7'))).toBe(429);
    // a made-up entry further left does not change who the proxy says is connecting
    expect(
      await upgradeStatus(harness.wsUrl, '127.0.0.5', viaProxy('198.51.100.1, 203.0.113.7')),
    ).toBe(429);
    // another client behind the same proxy is not locked out
    expect(await upgradeStatus(harness.wsUrl, '127.0.0.5', viaProxy('203.0.113.8'))).toBe(101);
    // X-Forwarded-For from an address that is not a trusted proxy is ignored
    await client('127.0.0.6', viaProxy('192.0.2.1'));
    await client('127.0.0.6', viaProxy('192.0.2.2'));
    expect(await upgradeStatus(harness.wsUrl, '127.0.0.6', viaProxy('192.0.2.3'))).toBe(429);
  });
});

describe('the budget of untrusted connections', () => {
  it('when full, closes the oldest unjoined connection of the address holding the most, not a joined one', async () => {
    const budget = createConnectionBudget(4);
    harness = await startRelayHarness({ connectionBudget: budget });
    const room = harness.room(1);
    // joined devices hold no place in the budget
    const member = await client('127.0.0.9');
    expect(await member.join(room, 1, harness.token(1, 1))).toMatchObject({ type: 'joined' });
    const first = [await client('127.0.0.1'), await client('127.0.0.1'), await client('127.0.0.1')];
    const second = await client('127.0.0.2');
    expect(budget.held).toBe(4);

    // a new address gets in: the oldest of 127.0.0.1 (three of the four) makes room
    const third = await client('127.0.0.3');
    await first[0]?.waitClosed();
    expect(await third.join(room, 3, harness.token(1, 3))).toMatchObject({ type: 'joined' });
    // 127.0.0.1 and 127.0.0.2 now hold two each (the third joined: it left the budget), and
    // 127.0.0.1 got there first; the status port's connections are in the same budget
    const secondAgain = await client('127.0.0.2');
    const status = await getFrom(`${harness.statusUrl}/metrics`, '127.0.0.4');
    expect(status.status).toBe(200);
    await first[1]?.waitClosed();
    expect(first[2]?.closeInfo).toBeUndefined();
    expect(second.closeInfo).toBeUndefined();
    expect(secondAgain.closeInfo).toBeUndefined();
    member.send({ to: 3, payload: { still: 'here' } });
    expect((await third.message()).payload).toEqual({ still: 'here' });
    expect(status.body).toContain('relay_unjoined_evicted_total 2');
    expect(status.body).toContain('connection_budget 4');
    expect(status.body).toContain('connection_budget_evicted_total 2');
  });
});
