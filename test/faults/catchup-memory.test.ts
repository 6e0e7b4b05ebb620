import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeLoopbackRelayConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { metricAt } from '../helpers/metrics.ts';
import { RelayClient, tcpOf } from '../helpers/relay-client.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'catchup-memory-secret-0123456789abcdef';
const mebibyte = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'catchup-memory-'));
const clients: RelayClient[] = [];
let relay: HostProcess | undefined;

afterAll(async () => {
  for (const client of clients) client.terminate();
  await relay?.stop('SIGKILL').catch(() => null);
  rmSync(dir, { recursive: true, force: true });
});

/** `VmRSS` (now) or `VmHWM` (the peak so far) of a process, in MiB. */
function memoryMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(kib) / 1024;
}

async function joined(url: string, room: string, device: number): Promise<RelayClient> {
  const client = new RelayClient(url);
  clients.push(client);
  const token = signDeviceToken(
    { userId: 1, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
    secret,
    'hmac-sha256',
  );
  const frame = await client.join(room, device, token);
  if (frame.type !== 'joined') throw new Error(`join failed: ${JSON.stringify(frame)}`);
  return client;
}

describe('a catch-up flood from a device that does not read (relay.maxMemoryBytes)', () => {
  it('keeps the relay process within the bound and answering, its catch-ups in a bounded line', async () => {
    const maxMemoryMiB = 32;
    writeLoopbackRelayConf(dir, secret, {
      'rate.perSecond': 100_000,
      'rate.burst': 100_000,
      'relay.maxMemoryBytes': maxMemoryMiB * mebibyte,
    });
    relay = await startHostProcess(['relay'], dir);
    const url = await relay.url('relay');
    const statusUrl = await relay.url('status');
    const pid = relay.child.pid as number;
    const room = createRoomId(1, secret);

    // a document of 16 MiB, far more than the sockets of a device that does not read hold
    const writer = await joined(url, room, 1);
    const data = Buffer.alloc(400 * 1024, 5).toString('base64');
    for (let ref = 1; ref <= 40; ref++) writer.send({ type: 'append', doc: 'big', ref, data });
    await writer.take((f) => f.type === 'appended' && f.ref === 40, 30_000);

    const reader = await joined(url, room, 2);
    tcpOf(reader).pause();
    const before = memoryMiB(pid, 'VmRSS');
    const flood = 300;
    for (let i = 0; i < flood; i++) reader.send({ type: 'catchup', doc: 'big', after: 0 });
    // one is answered, 256 wait behind it, the rest are dropped
    await eventually(
      async () => (await metricAt(statusUrl, 'sync_host_store_catchups_refused_total')) === 43,
      'the flood refused beyond the line',
      30_000,
    );
    expect(await metricAt(statusUrl, 'sync_host_store_catchups_pending')).toBe(257);
    const health = await fetch(`${statusUrl}/health`);
    expect(health.status).toBe(200);
    expect(await metricAt(statusUrl, 'relay_unsent_bytes')).toBeLessThanOrEqual(
      maxMemoryMiB * mebibyte,
    );
    const peakGrowth = memoryMiB(pid, 'VmHWM') - before;
    console.log(
      `relay RSS ${before.toFixed(0)} MiB before, peak growth ${peakGrowth.toFixed(0)} MiB`,
    );
    // the bound plus a fixed overhead (as for paused receivers), far below 300 catch-ups of
    // 16 MiB each holding its reads
    expect(peakGrowth).toBeLessThan(maxMemoryMiB + 192);
    expect(reader.closeInfo).toBeUndefined();

    // the device drops: its line is forgotten
    reader.terminate();
    await eventually(
      async () => (await metricAt(statusUrl, 'sync_host_store_catchups_pending')) === 0,
      'the line forgotten',
      10_000,
    );
  }, 120_000);
});
