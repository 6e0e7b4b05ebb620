import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { getFrom, slowConnections } from '../helpers/slow-connections.ts';
import { eventually } from '../helpers/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'synchost-conncaps-'));
const slow = slowConnections();
let host: HostProcess | undefined;

afterAll(async () => {
  slow.closeAll();
  await host?.stop('SIGKILL').catch(() => null);
  rmSync(dir, { recursive: true, force: true });
});

/** 370 unfinished requests from 127.0.0.1 to `port`, ten at a time. */
async function flood(port: number): Promise<void> {
  const head = 'GET /health HTTP/1.1\r\nHost: host\r\nX-Slow: ';
  for (let i = 0; i < 370; i += 10)
    await Promise.all(Array.from({ length: 10 }, () => slow.open(port, '127.0.0.1', head)));
}

describe('slow connections under a descriptor limit', () => {
  it('370 from one address on the auth port, then 370 on the status port, keep no client of another address out', async () => {
    // plain HTTP, so that the slow requests reach the cap
    writeConf(dir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', TLS: 'off' });
    writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
    // the whole host allowed 400 descriptors; the caps at their defaults (64 auth, 16 status)
    host = await startHostProcess(['--headless'], dir, {
      wrapper: ['prlimit', '--nofile=400:400'],
    });
    const auth = new URL(await host.url('auth'));
    const status = new URL(await host.url('status'));
    const pid = host.child.pid as number;

    await flood(Number(auth.port));
    // past the 64 the address may keep open, each is answered 429 and closed within a second
    // (fewer stay when the refused ones, held until they close, fill the process's budget of
    // untrusted connections: its oldest are then closed, all of this one address)
    await eventually(() => slow.stillOpen().length <= 64, 'refused connections closed', 10_000);
    const held = slow.stillOpen().length;
    expect(held).toBeGreaterThan(0);
    expect((await getFrom(`${auth.origin}/health`, '127.0.0.2')).status).toBe(200);
    // the unfinished requests are still open: the cap, not a timeout, kept the other client in
    expect(slow.stillOpen()).toHaveLength(held);

    await flood(Number(status.port));
    await eventually(() => slow.stillOpen().length <= 64 + 16, 'refused closed', 10_000);
    expect((await getFrom(`${status.origin}/health`, '127.0.0.2')).status).toBe(200);
    expect((await getFrom(`${auth.origin}/health`, '127.0.0.2')).status).toBe(200);
    expect(readdirSync(`/proc/${pid}/fd`).length).toBeLessThan(250);
  }, 60_000);
});
