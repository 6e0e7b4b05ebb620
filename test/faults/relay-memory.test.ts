import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { writeLoopbackRelayConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { RelayClient, tcpOf } from '../helpers/relay-client.ts';

const secret = 'relay-memory-secret-0123456789abcdef';
const mebibyte = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'relay-memory-'));
const clients: RelayClient[] = [];
let relay: HostProcess | undefined;

afterAll(async () => {
  for (const client of clients) client.terminate();
  await relay?.stop('SIGKILL').catch(() => null);
  rmSync(dir, { recursive: true, force: true });
});

/** A line of /proc/<pid>/status in MiB (`VmRSS`: now, `VmHWM`: the peak so far). */
function memoryMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(kib) / 1024;
}

const token = (user: number, device: number) =>
  signDeviceToken(
    { userId: user, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
    secret,
    'hmac-sha256',
  );

/** One room id per user (each call of createRoomId makes a new one). */
const rooms = new Map<number, string>();

async function joined(url: string, user: number, device: number): Promise<RelayClient> {
  const client = new RelayClient(url);
  clients.push(client);
  if (!rooms.has(user)) rooms.set(user, createRoomId(user, secret));
  const frame = await client.join(rooms.get(user) as string, device, token(user, device));
  if (frame.type !== 'joined') throw new Error(`join failed: ${JSON.stringify(frame)}`);
  return client;
}

const numbers = (client: RelayClient) =>
  client.allMessages().map((f) => (f.payload as { n: number }).n);

describe('relay memory under paused receivers (relay.maxMemoryBytes)', () => {
  it('keeps the relay process within the bound, closes the slowest with 1013, and loses nothing', async () => {
    const maxMemoryMiB = 32;
    writeLoopbackRelayConf(dir, secret, {
      'rate.perSecond': 100_000,
      'rate.burst': 100_000,
      'buffer.deviceMaxBytes': 64 * mebibyte,
      'relay.maxQueuedBytes': maxMemoryMiB * mebibyte,
      'relay.maxMemoryBytes': maxMemoryMiB * mebibyte,
    });
    relay = await startHostProcess(['relay'], dir);
    const url = await relay.url('relay');
    const pid = relay.child.pid as number;

    // 16 rooms, each a sender and a receiver that stops reading its socket
    const users = Array.from({ length: 16 }, (_, i) => i + 1);
    const senders: RelayClient[] = [];
    const receivers: RelayClient[] = [];
    for (const user of users) {
      senders.push(await joined(url, user, 1));
      receivers.push(await joined(url, user, 2));
    }
    for (const sender of senders) await sender.next('presence');
    for (const receiver of receivers) tcpOf(receiver).pause();
    const before = memoryMiB(pid, 'VmRSS');

    // up to 32 MiB of direct messages to each paused receiver (512 MiB in all), each sender
    // stopping once its receiver is gone (a relay that holds everything never lets one go)
    const perReceiver = 64;
    const chunk = 'm'.repeat(512 * 1024);
    const sent = await Promise.all(
      senders.map(async (sender) => {
        let n = 0;
        const gone = () => sender.frames.some((f) => f.type === 'presence' && f.state === 'left');
        while (n < perReceiver && !gone()) {
          sender.send({ to: 2, payload: { n: n++, chunk } });
          if (n % 4 === 0) await sender.sync();
        }
        await sender.sync();
        return n;
      }),
    );
    const peakGrowth = memoryMiB(pid, 'VmHWM') - before;
    console.log(
      `relay RSS ${before.toFixed(0)} MiB before, peak growth ${peakGrowth.toFixed(0)} MiB`,
    );

    // every receiver reads again: what reached its socket, then (if it was cut) the close
    // frame; a closed one joins again and gets the rest from the buffer, once, in order
    const closes: number[] = [];
    for (const [i, receiver] of receivers.entries()) {
      const count = sent[i] as number;
      const all = Array.from({ length: count }, (_, n) => n);
      tcpOf(receiver).resume();
      const got = await Promise.race([
        receiver.closed.then((info) => info.code),
        receiver
          .take((f) => (f.payload as { n?: number } | undefined)?.n === count - 1, 20_000)
          .then(() => 'complete' as const),
      ]);
      if (got === 'complete') {
        expect(numbers(receiver)).toEqual(all);
        continue;
      }
      closes.push(got);
      const live = numbers(receiver);
      const back = await joined(url, users[i] as number, 2);
      const frame = back.frames.find((f) => f.type === 'joined');
      expect(frame).toMatchObject({ buffered: count - live.length, gap: false });
      for (let k = live.length; k < count; k++) await back.message(10_000);
      expect([...live, ...numbers(back)]).toEqual(all);
    }
    // 16 × 32 MiB cannot be held within 32 MiB: all but a couple were closed, each with 1013
    expect(closes.length).toBeGreaterThanOrEqual(12);
    expect(new Set(closes)).toEqual(new Set([1013]));
    // the bound plus a fixed overhead (frames being read and spliced, the buffer's writes, and
    // mostly garbage not yet collected: V8 collects Buffers once tens of MiB accumulated),
    // far below the 512 MiB the paused receivers were sent
    expect(peakGrowth).toBeLessThan(maxMemoryMiB + 192);
  }, 120_000);
});
