import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuthServer, createAuthServer } from '../../server/auth/index.ts';
import { captureLogger } from '../helpers/capture.ts';
import { testAuthConfig } from '../helpers/configs.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';

/** A client that opens a connection and trickles bytes; resolves with when the server cut it. */
function trickle(port: number, chunks: string[], everyMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let i = 0;
    const timer = setInterval(() => {
      if (i < chunks.length && !socket.destroyed) socket.write(chunks[i++] as string);
    }, everyMs);
    socket.on('data', () => {});
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      resolve(Date.now() - started);
    });
  });
}

describe('slowloris on the auth port', () => {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-slowloris-'));
  let server: AuthServer;
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('cuts connections that trickle headers or a body, while normal requests keep being served', async () => {
    const config = testAuthConfig(dir);
    server = await createAuthServer({
      config,
      secret: 'slowloris-secret',
      logger: captureLogger().logger,
      print: () => {},
      httpTimeouts: { headersMs: 600, requestMs: 1_200 },
    });
    await server.ready;
    const port = await server.listen();

    // 40 connections sending one header byte every 100 ms (never finishing), and 10 sending a
    // complete header block but a body one byte at a time.
    const header = `GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}`;
    const slowHeaders = Array.from({ length: 40 }, () => trickle(port, header.split(''), 100));
    const slowBodies = Array.from({ length: 10 }, () =>
      trickle(
        port,
        [
          'POST /auth/magic-link HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n',
          ...'{"email":"slow@example.com"'.split(''),
        ],
        100,
      ),
    );

    const served: number[] = [];
    for (let i = 0; i < 5; i++)
      served.push((await fetch(`http://127.0.0.1:${port}/health`)).status);
    expect(served).toEqual([200, 200, 200, 200, 200]);

    const headerCuts = await Promise.all(slowHeaders);
    const bodyCuts = await Promise.all(slowBodies);
    // cut after the timeout (plus Node's check interval), long before the trickle would end
    for (const ms of headerCuts) expect(ms).toBeLessThan(2_500);
    for (const ms of bodyCuts) expect(ms).toBeLessThan(3_000);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  }, 20_000);
});

describe('slowloris on the relay and status ports', () => {
  let harness: RelayHarness | undefined;
  afterAll(async () => {
    await harness?.close();
  });

  it('cuts upgrade requests and status requests that never finish, while devices keep joining', async () => {
    harness = await startRelayHarness({ tuning: { requestTimeoutMs: 600 } });
    const wsPort = Number(new URL(harness.wsUrl).port);
    const statusPort = Number(new URL(harness.statusUrl).port);

    // 30 upgrade requests and 10 status requests sending one header byte every 100 ms, never
    // finishing (the trickle would take 20 s or more).
    const upgrade = `GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nX-Slow: ${'a'.repeat(200)}`;
    const status = `GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}`;
    const slowUpgrades = Array.from({ length: 30 }, () => trickle(wsPort, upgrade.split(''), 100));
    const slowStatus = Array.from({ length: 10 }, () => trickle(statusPort, status.split(''), 100));

    const room = harness.room(1);
    const { client, joined } = await harness.joined(room, 1, 1);
    expect(joined.type).toBe('joined');
    expect((await fetch(`${harness.statusUrl}/health`)).status).toBe(200);

    for (const ms of await Promise.all(slowUpgrades)) expect(ms).toBeLessThan(2_500);
    for (const ms of await Promise.all(slowStatus)) expect(ms).toBeLessThan(2_500);
    const again = await harness.joined(room, 1, 2);
    expect(again.joined.type).toBe('joined');
    // a joined connection is past its upgrade request: the limit no longer applies to it, even
    // once a slow request started after the join has been cut
    expect(await trickle(wsPort, upgrade.split(''), 100)).toBeGreaterThanOrEqual(600);
    client.send({ to: 'broadcast', payload: { still: 'here' } });
    expect((await again.client.message()).payload).toEqual({ still: 'here' });
  }, 20_000);
});
