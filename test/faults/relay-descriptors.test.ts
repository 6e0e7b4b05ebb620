import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeLoopbackRelayConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'relay-descriptors-secret-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'relay-descriptors-'));
const sockets: Socket[] = [];
let relay: HostProcess | undefined;
let client: RelayClient | undefined;

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  client?.terminate();
  await relay?.stop('SIGKILL').catch(() => null);
  rmSync(dir, { recursive: true, force: true });
});

describe('upgrade slowloris under a descriptor limit', () => {
  it('370 unfinished upgrade requests from one address do not keep a client of another address out', async () => {
    writeLoopbackRelayConf(dir, secret);
    // the relay alone, allowed 400 descriptors; relay.maxUnjoinedPerAddress at its default (32)
    relay = await startHostProcess(['relay'], dir, { wrapper: ['prlimit', '--nofile=400:400'] });
    const url = new URL(await relay.url('relay'));
    const pid = relay.child.pid as number;

    let closed = 0;
    const open = async () => {
      const socket = connect(Number(url.port), '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => {});
      socket.on('close', () => closed++);
      // reads what the relay answers (429 or nothing) and so sees when it closes
      socket.resume();
      await once(socket, 'connect');
      socket.write('GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nX-Slow: ');
    };
    for (let i = 0; i < 370; i += 10) await Promise.all(Array.from({ length: 10 }, open));
    // past the 32 the address may keep open, each is answered 429 and closed within a second
    // (the request timeout of 10 s would close them all, but much later)
    await eventually(() => closed >= 370 - 32, 'refused connections closed', 5_000);
    expect(sockets.filter((s) => !s.destroyed)).toHaveLength(32);
    expect(readdirSync(`/proc/${pid}/fd`).length).toBeLessThan(150);

    client = new RelayClient(url.href, { ws: { localAddress: '127.0.0.2' } });
    const room = createRoomId(1, secret);
    const token = signDeviceToken(
      { userId: 1, deviceId: 1, issuedAt: Math.floor(Date.now() / 1000) },
      secret,
      'hmac-sha256',
    );
    expect(await client.join(room, 1, token)).toMatchObject({ type: 'joined' });
    // the unfinished requests are still open: the limit, not their timeout, kept the client in
    expect(sockets.filter((s) => !s.destroyed)).toHaveLength(32);
  }, 30_000);
});
