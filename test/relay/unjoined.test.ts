import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RelayClient, upgradeStatus } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

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

describe('connections that have not joined (relay.maxUnjoinedPerAddress)', () => {
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
