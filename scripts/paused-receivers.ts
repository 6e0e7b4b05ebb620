/**
 * `npx tsx scripts/paused-receivers.ts`: the relay's memory when receivers stop reading. A relay
 * process (`bin/sync-host relay`, relay.conf at its defaults but for the rate limit) with 16
 * rooms, each a sender and a receiver whose socket is paused; every sender sends 64 MiB of
 * direct 512 KiB messages to its receiver. Prints the relay's RSS before, its peak (VmHWM) and
 * how many receivers it closed with 1013. RECEIVERS and MIB_EACH change the load.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRoomId, signDeviceToken } from '../server/tokens.ts';
import { writeLoopbackRelayConf } from '../test/helpers/configs.ts';
import { startHostProcess } from '../test/helpers/host-process.ts';
import { RelayClient } from '../test/helpers/relay-client.ts';

const receiversCount = Number(process.env.RECEIVERS ?? 16);
const mibEach = Number(process.env.MIB_EACH ?? 64);
const secret = 'paused-receivers-secret-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'paused-receivers-'));
writeLoopbackRelayConf(dir, secret, {
  'rate.perSecond': 100_000,
  'rate.burst': 100_000,
});
const relay = await startHostProcess(['relay'], dir);
const url = await relay.url('relay');
const pid = relay.child.pid as number;
const memoryMiB = (field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) /
  1024;

const clients: RelayClient[] = [];
async function joined(room: string, user: number, device: number): Promise<RelayClient> {
  const client = new RelayClient(url);
  clients.push(client);
  const token = signDeviceToken(
    { userId: user, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
    secret,
    'hmac-sha256',
  );
  const frame = await client.join(room, device, token);
  if (frame.type !== 'joined') throw new Error(`join failed: ${JSON.stringify(frame)}`);
  return client;
}

/** A round trip through the relay, with a long deadline (a loaded relay answers late). */
async function sync(client: RelayClient): Promise<void> {
  client.send({ type: 'ping' });
  await client.next('pong', 120_000);
}

const pairs: Array<{ sender: RelayClient; receiver: RelayClient }> = [];
for (let user = 1; user <= receiversCount; user++) {
  const room = createRoomId(user, secret);
  const sender = await joined(room, user, 1);
  const receiver = await joined(room, user, 2);
  await sender.next('presence');
  (receiver.socket as unknown as { _socket: Socket })._socket.pause();
  pairs.push({ sender, receiver });
}
const before = memoryMiB('VmRSS');
const chunk = 'm'.repeat(512 * 1024);
const started = Date.now();
await Promise.all(
  pairs.map(async ({ sender }) => {
    for (let n = 0; n < mibEach * 2; n++) {
      sender.send({ to: 2, payload: { n, chunk } });
      if (n % 4 === 3) await sync(sender);
    }
    await sync(sender);
  }),
);
const peak = memoryMiB('VmHWM');
const closed = pairs.filter(({ sender }) =>
  sender.frames.some((f) => f.type === 'presence' && f.state === 'left'),
).length;
console.log(
  JSON.stringify({
    receivers: receiversCount,
    sentPerReceiverMiB: mibEach,
    seconds: Math.round((Date.now() - started) / 1000),
    rssBeforeMiB: Math.round(before),
    rssPeakMiB: Math.round(peak),
    receiversClosed: closed,
  }),
);
for (const client of clients) client.terminate();
await relay.stop('SIGKILL');
rmSync(dir, { recursive: true, force: true });
