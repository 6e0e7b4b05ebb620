import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import { createRelay, type Relay } from '../../server/relay/relay.ts';
import { testRelayConfig, testSecret } from '../helpers/configs.ts';
import { RelayClient } from '../helpers/relay-client.ts';

let relay: Relay | undefined;
let dir: string | undefined;

afterEach(async () => {
  await relay?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  relay = undefined;
});

/** A relay whose log lines (debug and up) are collected. */
async function loggedRelay(secret: string) {
  dir = mkdtempSync(join(tmpdir(), 'relay-log-'));
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  relay = createRelay({
    config: testRelayConfig(dir, { secret }),
    secret,
    logger: createLogger('debug', sink),
  });
  const ports = await relay.listen();
  return { lines, url: `ws://127.0.0.1:${ports.wsPort}/` };
}

describe('relay logging', () => {
  it('warns loudly at start when the secret is empty', async () => {
    const { lines } = await loggedRelay('');
    const warning = lines
      .map((l) => JSON.parse(l) as { level: string; msg: string })
      .find((l) => l.level === 'warn');
    expect(warning?.msg).toMatch(/AUTHENTICATION IS OFF/);
  });

  it('does not warn when a secret is set', async () => {
    const { lines } = await loggedRelay(testSecret);
    expect(lines.some((l) => l.includes('"level":"warn"'))).toBe(false);
  });

  it('never writes a token or the secret to the log, even for refused joins', async () => {
    const { lines, url } = await loggedRelay(testSecret);
    const client = new RelayClient(url);
    const token = `1:2:1700000000.${'ab'.repeat(32)}`;
    expect(
      await client.join(
        '1.00000000000000000000000000000000.00000000000000000000000000000000',
        2,
        token,
      ),
    ).toMatchObject({
      code: 'auth_failed',
    });
    await client.waitClosed();
    expect(lines.some((l) => l.includes('join refused'))).toBe(true);
    expect(lines.join('\n')).not.toContain('ab'.repeat(32));
    expect(lines.join('\n')).not.toContain(testSecret);
  });

  it('closes a text frame that is not valid UTF-8 with 1007 and logs no stack', async () => {
    const { lines, url } = await loggedRelay(testSecret);
    const client = new RelayClient(url);
    await client.opened;
    client.socket.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
    expect((await client.waitClosed()).code).toBe(1007);
    expect(lines.join('\n')).not.toMatch(/\n\s+at /);
  });
});
