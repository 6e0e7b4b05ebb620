import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { type AuthServer, createAuthServer } from '../../server/auth/index.ts';
import { makeSelfSigned } from '../../server/tls/certificate.ts';
import { serveTls } from '../../server/tls/secure-port.ts';
import { captureLogger } from '../helpers/capture.ts';
import { testAuthConfig } from '../helpers/configs.ts';
import { getFrom, slowConnections } from '../helpers/slow-connections.ts';
import { eventually } from '../helpers/wait.ts';

let server: AuthServer | undefined;
let dir: string | undefined;
const slow = slowConnections();
afterEach(async () => {
  slow.closeAll();
  slow.sockets.length = 0;
  await server?.close();
  server = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The auth service with at most 4 open connections per address, 127.0.0.1 a trusted proxy. */
async function capped(tls = false): Promise<number> {
  dir = mkdtempSync(join(tmpdir(), 'synchost-conncap-'));
  server = await createAuthServer({
    config: testAuthConfig(dir, { TRUST_PROXY: '127.0.0.1' }),
    secret: 'connection-cap-secret-0123456789abcdef',
    logger: captureLogger().logger,
    print: () => {},
    maxConnectionsPerAddress: 4,
  });
  await server.ready;
  if (tls) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const key = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const pair = await makeSelfSigned(key, ['127.0.0.1'], Date.now());
    const context = createSecureContext({ cert: pair.cert, key: pair.key });
    serveTls(server.server, { context: () => context });
  }
  return server.listen();
}

const refusal = {
  error: {
    code: 'rate_limited',
    message: 'too many open connections from this address (at most 4); retry later',
  },
};

describe('open connections per address on the auth port', () => {
  it('counts a TLS port’s connections at accept: one that never sends a byte holds a place, one past the cap is closed at once', async () => {
    const port = await capped(true);
    // connected, nothing sent: the TLS layer has not seen them, the cap has
    for (let i = 0; i < 4; i++) await slow.open(port, '127.0.0.2', '');
    const fifth = await slow.open(port, '127.0.0.2', '');
    await eventually(() => fifth.ended, 'the fifth connection closed', 5_000);
    expect(fifth.answer).toBe(''); // nothing in plain text on a TLS port
    expect(slow.stillOpen()).toHaveLength(4);
  });

  it('past the cap, a connection is answered 429 and closed; other addresses are served, a closed one frees a place', async () => {
    const port = await capped();
    const unfinished = 'GET /health HTTP/1.1\r\nHost: a\r\nX-Slow: ';
    for (let i = 0; i < 4; i++) await slow.open(port, '127.0.0.2', unfinished);
    const fifth = await slow.open(port, '127.0.0.2', unfinished);
    await eventually(() => fifth.ended, 'the fifth connection closed', 5_000);
    expect(fifth.answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(fifth.answer).toContain('Retry-After: 10');
    expect(JSON.parse(fifth.answer.slice(fifth.answer.indexOf('\r\n\r\n') + 4))).toEqual(refusal);
    expect(slow.stillOpen()).toHaveLength(4);

    const other = await getFrom(`http://127.0.0.1:${port}/health`, '127.0.0.3');
    expect(other.status).toBe(200);
    expect((await getFrom(`http://127.0.0.1:${port}/health`, '127.0.0.2')).status).toBe(429);
    slow.sockets[0]?.destroy();
    await eventually(
      async () => (await getFrom(`http://127.0.0.1:${port}/health`, '127.0.0.2')).status === 200,
      'a place for 127.0.0.2 again',
      5_000,
    );
  });

  it('counts requests through a trusted proxy by forwarded address, an IPv6 address by its /64', async () => {
    const port = await capped();
    // requests whose body never finishes, each through the proxy (127.0.0.1) on its own connection
    const stalled = (client: string) =>
      slow.open(
        port,
        '127.0.0.1',
        `POST /auth/magic-link HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: ${client}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":`,
      );
    for (let i = 0; i < 4; i++) await stalled('203.0.113.7');
    const health = (client: string) =>
      getFrom(`http://127.0.0.1:${port}/health`, '127.0.0.1', { 'X-Forwarded-For': client });
    await eventually(
      async () => (await health('203.0.113.7')).status === 429,
      'the fifth request of 203.0.113.7 refused',
      5_000,
    );
    const refused = await health('203.0.113.7');
    expect(JSON.parse(refused.body)).toEqual(refusal);
    expect((await health('203.0.113.8')).status).toBe(200);

    for (let i = 1; i <= 4; i++) await stalled(`2001:db8:1:2::${i}`);
    await eventually(
      async () => (await health('2001:db8:1:2:ffff:ffff:ffff:ffff')).status === 429,
      'another address of the same /64 refused',
      5_000,
    );
    expect((await health('2001:db8:1:3::1')).status).toBe(200);
    // the proxy's own connections are not counted: its stalled ones are all still open
    expect(slow.stillOpen()).toHaveLength(8);
  });
});
