/**
 * The disk attack on the relay buffer, as one ordinary account would run it: a relay process
 * (`bin/sync-host relay`, default bounds and rate limit) on loopback, one room of 64 devices of one
 * user, 63 of them dropped without leave, and one connection broadcasting as fast as the rate limit
 * lets it (200/s, burst 400). Prints the size of relay.db and its WAL while it runs and after.
 *
 *   npx tsx scripts/buffer-flood.ts
 *   FLOOD_SECONDS=5.3 FLOOD_PAYLOAD_BYTES=49152 FLOOD_WAIT_WINDOW=1 npx tsx scripts/buffer-flood.ts
 *
 * FLOOD_WAIT_WINDOW=1 also waits for the buffer window (60 s) and one sweep, then prints the size
 * again (the file gives its space back).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { createRoomId, signDeviceToken } from '../server/tokens.ts';
import { writeLoopbackRelayConf } from '../test/helpers/configs.ts';
import { startHostProcess } from '../test/helpers/host-process.ts';

const seconds = Number(process.env.FLOOD_SECONDS ?? 5.3);
const payloadBytes = Number(process.env.FLOOD_PAYLOAD_BYTES ?? 48 * 1024);
const waitWindow = process.env.FLOOD_WAIT_WINDOW === '1';
const secret = 'flood-secret-0123456789abcdef0123';
const devices = 64;
const mib = 1024 * 1024;

const dir = mkdtempSync(join(tmpdir(), 'buffer-flood-'));
writeLoopbackRelayConf(dir, secret, {
  'log.level': 'warn',
});
const relay = await startHostProcess(['relay'], dir);
const url = await relay.url('relay');
const statusUrl = await relay.url('status');
const room = createRoomId(1, secret);
const token = (device: number) =>
  signDeviceToken(
    { userId: 1, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
    secret,
    'hmac-sha256',
  );

function join1(device: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once('error', reject);
    socket.once('open', () =>
      socket.send(JSON.stringify({ type: 'join', room, device, token: token(device) })),
    );
    socket.on('message', function onJoined(data) {
      if (String(data).includes('"joined"')) {
        socket.off('message', onJoined);
        resolve(socket);
      }
    });
  });
}

const fileBytes = () =>
  ['relay.db', 'relay.db-wal'].reduce(
    (sum, name) => sum + (statSync(join(dir, name), { throwIfNoEntry: false })?.size ?? 0),
    0,
  );

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  return Number(
    text
      .split('\n')
      .find((line) => line.startsWith(`${name} `))
      ?.split(' ')[1],
  );
}

const sender = await join1(1);
for (let device = 2; device <= devices; device++) (await join1(device)).terminate();
await new Promise((resolve) => setTimeout(resolve, 500));

const frame = JSON.stringify({ to: 'broadcast', payload: { pad: 'x'.repeat(payloadBytes) } });
let sent = 0;
let peak = 0;
const start = performance.now();
// the burst first, then 200 a second: what the rate limit lets through, nothing refused
const allowed = (elapsedMs: number) => Math.floor(400 + (elapsedMs / 1000) * 199);
while (performance.now() - start < seconds * 1000) {
  while (sent < allowed(performance.now() - start)) {
    sender.send(frame);
    sent++;
  }
  peak = Math.max(peak, fileBytes());
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await new Promise((resolve) => setTimeout(resolve, 1_000));
peak = Math.max(peak, fileBytes());
const after = fileBytes();
console.log(
  `${sent} broadcasts of ${payloadBytes} B to ${devices - 1} absent devices in ${seconds} s ` +
    `(${((sent * payloadBytes) / mib).toFixed(0)} MiB sent, ${((sent * payloadBytes * (devices - 1)) / mib).toFixed(0)} MiB as per-device copies)`,
);
console.log(
  `relay.db + WAL: peak ${(peak / mib).toFixed(1)} MiB, after ${(after / mib).toFixed(1)} MiB; ` +
    `counted ${((await metric('relay_buffer_bytes')) / mib).toFixed(1)} MiB; ` +
    `rate-limited ${await metric('relay_rate_limited_total')}`,
);
if (waitWindow) {
  await new Promise((resolve) => setTimeout(resolve, 72_000));
  console.log(`after the window and a sweep: ${(fileBytes() / mib).toFixed(1)} MiB`);
}
sender.close();
// a relay that fell behind writes what it queued before it exits
await relay.stop('SIGTERM', 120_000);
console.log(`after the relay stopped: ${(fileBytes() / mib).toFixed(1)} MiB`);
rmSync(dir, { recursive: true, force: true });
