import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type AuthServer, createAuthServer } from '../../server/auth/index.ts';
import { captureLogger } from '../helpers/capture.ts';
import { testAuthConfig } from '../helpers/configs.ts';

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
