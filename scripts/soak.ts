/**
 * Soak run (npm run soak; not part of npm test). A headless host in a child process on
 * loopback; 1,000 devices in 250 rooms broadcast while devices drop (clean close without leave)
 * and rejoin at random, and the auth API serves logins and project registrations. At the end
 * every message sent to a present or briefly absent device must have arrived exactly once, in
 * order. Prints throughput, p99 latency, errors and the host's peak RSS. SOAK_SECONDS (120).
 * Abusive clients from another address run in the first room meanwhile (`soak-abusers.ts`: a
 * receiver that stops reading, a flooder past the rate limit, junk frames, unfinished upgrade
 * requests): the normal devices must lose nothing all the same.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { createRoomId } from '../server/tokens.ts';
import { writeConf } from '../test/helpers/configs.ts';
import { startHostProcess } from '../test/helpers/host-process.ts';
import { startAbusers } from './soak-abusers.ts';

const seconds = Number(process.env.SOAK_SECONDS ?? 120);
const rooms = 250;
const perRoom = 4;
const sendEveryMs = 500;

const dir = mkdtempSync(join(tmpdir(), 'synchost-soak-'));
writeConf(dir, 'auth.conf', {
  PORT: 0,
  BIND: '127.0.0.1',
  MDNS: 'off',
  DEFAULT_TIER: 'pro',
  TLS: 'off',
});
writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
const host = await startHostProcess(['--headless'], dir);
const authUrl = await host.url('auth');
const relayUrl = await host.url('relay');
const statusUrl = await host.url('status');
const secret = readFileSync(join(dir, 'data', 'secret'), 'utf8').trim();
const pid = host.child.pid ?? 0;
let peakRssKiB = 0;
const rssTimer = setInterval(() => {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  peakRssKiB = Math.max(peakRssKiB, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
}, 1_000);

interface Device {
  user: number;
  id: number;
  room: string;
  token: string;
  socket?: WebSocket;
  joined: boolean;
  joinedAt: number;
  seq: number;
  /** sender id → last seq received from it, and counts. */
  last: Map<number, number>;
  first: Map<number, number>;
  received: number;
  /** Its client address: the devices of a room share one, as behind a home router. */
  address: string;
  /** Being dropped by this run (its close is not an error). */
  dropping: boolean;
}
const errors: string[] = [];
let duplicates = 0;
let outOfOrder = 0;
let delivered = 0;
const latencies: number[] = [];
const devices: Device[] = [];

let running = false;
let finished = false;

function connectDevice(device: Device): Promise<void> {
  return new Promise((resolve) => {
    const socket = new WebSocket(relayUrl, { localAddress: device.address });
    device.socket = socket;
    socket.on('open', () =>
      socket.send(
        JSON.stringify({ type: 'join', room: device.room, device: device.id, token: device.token }),
      ),
    );
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as {
        type?: string;
        code?: string;
        from?: string | number;
        payload?: { n: number; t: number };
      };
      if (frame.type === 'joined') {
        device.joined = true;
        device.joinedAt = Date.now();
        resolve();
        return;
      }
      if (frame.type === 'error') errors.push(`relay error ${frame.code}`);
      // an abuser's flood has no sequence number: not one of the soak's messages
      if (frame.type !== undefined || typeof frame.payload?.n !== 'number') return;
      const from = Number(frame.from);
      const { n, t } = frame.payload;
      const last = device.last.get(from);
      if (last !== undefined && n <= last) duplicates++;
      else if (last !== undefined && n !== last + 1) outOfOrder++;
      if (last === undefined) device.first.set(from, n);
      device.last.set(from, Math.max(n, last ?? -1));
      device.received++;
      delivered++;
      if (t >= device.joinedAt) latencies.push(Date.now() - t);
    });
    socket.on('close', (code) => {
      device.joined = false;
      if (finished || device.dropping) return;
      // closed by the relay (or refused), not by this run: an error, and back again as a
      // client library would; a join still awaited completes with the new connection
      errors.push(`closed by the relay: ${code}`);
      setTimeout(() => void connectDevice(device).then(resolve), 500);
    });
    socket.on('error', (err) => errors.push(`socket ${err.message}`));
  });
}

/** Drops a device with a close handshake (no leave): the relay buffers for it until it is back. */
async function dropAndRejoin(device: Device): Promise<void> {
  const socket = device.socket;
  if (!socket || !device.joined) return;
  device.joined = false;
  device.dropping = true;
  await new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.close();
  });
  device.dropping = false;
  await new Promise((resolve) => setTimeout(resolve, 500 + Math.random() * 2_500));
  await connectDevice(device);
}

// Auth traffic: logins (link, verify) and project registrations, from rotating loopback addresses.
let authOps = 0;
let authErrors = 0;
let authSeq = 0;
function http(
  method: string,
  path: string,
  localAddress: string,
  body?: unknown,
  token?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      `${authUrl}${path}`,
      {
        method,
        localAddress,
        agent: false,
        headers: {
          ...(payload
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }
            : {}),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
async function authCycle(): Promise<void> {
  const i = authSeq++;
  const address = `127.0.${1 + (Math.floor(i / 4) % 250)}.${1 + (i % 4)}`;
  const email = `soak${i}@example.com`;
  const link = await magicLinkToken(email, address);
  const verified = await http(
    'GET',
    `/auth/verify?token=${link}&deviceName=soak&platform=linux`,
    address,
  );
  if (verified.status !== 200) throw new Error(`verify ${verified.status}`);
  const { deviceToken } = JSON.parse(verified.text) as { deviceToken: string };
  const project = await http(
    'POST',
    '/auth/project',
    address,
    { projectKey: `p${i}`, name: 'soak' },
    deviceToken,
  );
  if (project.status !== 201) throw new Error(`project ${project.status}`);
  authOps += 3;
}

/** Asks for a magic link and reads it from the host's output (dev mode prints it). */
async function magicLinkToken(email: string, address: string): Promise<string> {
  const before = host.stdout.length;
  const sent = await http('POST', '/auth/magic-link', address, { email });
  if (sent.status !== 200) throw new Error(`magic-link ${sent.status}`);
  const prefix = `[dev] Magic link token for ${email}: `;
  const until = Date.now() + 10_000;
  const printed = () => host.stdout.slice(before).find((l) => l.startsWith(prefix));
  let line = printed();
  while (line === undefined) {
    if (Date.now() > until) throw new Error('no magic link printed');
    await new Promise((resolve) => setTimeout(resolve, 5));
    line = printed();
  }
  return line.slice(prefix.length).trim();
}

/**
 * `count` devices of one user, issued by the auth service (the relay refuses tokens it did not
 * issue): a login without a device gives a JWT, each device is then `POST /auth/devices`.
 */
async function issueDevices(
  email: string,
  address: string,
  count: number,
): Promise<{ user: number; issued: Array<{ id: number; token: string }> }> {
  const verified = await http(
    'GET',
    `/auth/verify?token=${await magicLinkToken(email, address)}`,
    address,
  );
  if (verified.status !== 200) throw new Error(`verify ${verified.status} ${verified.text}`);
  const { jwt, user } = JSON.parse(verified.text) as { jwt: string; user: { id: number } };
  const issued: Array<{ id: number; token: string }> = [];
  for (let i = 0; i < count; i++) {
    const made = await http(
      'POST',
      '/auth/devices',
      address,
      { deviceName: `soak ${i}`, platform: 'linux' },
      jwt,
    );
    if (made.status !== 201) throw new Error(`device ${made.status} ${made.text}`);
    const { deviceToken, device } = JSON.parse(made.text) as {
      deviceToken: string;
      device: { id: number };
    };
    issued.push({ id: device.id, token: deviceToken });
  }
  return { user: user.id, issued };
}

const issuing = Date.now();
for (let r0 = 0; r0 < rooms; r0 += 10) {
  await Promise.all(
    Array.from({ length: Math.min(10, rooms - r0) }, async (_, k) => {
      const r = r0 + k;
      const address = `127.1.${r >> 8}.${(r & 255) + 1}`;
      const { user, issued } = await issueDevices(`room${r}@soak.example`, address, perRoom);
      const room = createRoomId(user, secret);
      for (const { id, token } of issued) {
        devices.push({
          user,
          id,
          room,
          token,
          joined: false,
          joinedAt: 0,
          seq: 0,
          last: new Map(),
          first: new Map(),
          received: 0,
          address,
          dropping: false,
        });
      }
    }),
  );
}
console.log(`${devices.length} devices issued by the auth service in ${Date.now() - issuing} ms`);

const started = Date.now();
for (let i = 0; i < devices.length; i += 50)
  await Promise.all(devices.slice(i, i + 50).map(connectDevice));
console.log(`${devices.length} devices joined in ${rooms} rooms after ${Date.now() - started} ms`);

const abusers = startAbusers({
  relayUrl,
  room: devices[0]?.room as string,
  devices: (await issueDevices('room0@soak.example', '127.0.0.66', 3)).issued,
  address: '127.0.0.66',
  halfOpenAddress: '127.0.0.67',
  ratePerSecond: 200,
});

running = true;
let sent = 0;
const sendTimer = setInterval(() => {
  for (const device of devices) {
    if (!device.joined || Math.random() > 1 / (sendEveryMs / 100)) continue;
    device.socket?.send(
      JSON.stringify({ to: 'broadcast', payload: { n: device.seq++, t: Date.now() } }),
    );
    sent++;
  }
}, 100);
const drops: Promise<void>[] = [];
const dropTimer = setInterval(() => {
  const device = devices[Math.floor(Math.random() * devices.length)] as Device;
  drops.push(dropAndRejoin(device));
}, 50);
const authLoops = Array.from({ length: 2 }, async () => {
  while (running) {
    await authCycle().catch((err: unknown) => {
      authErrors++;
      errors.push(`auth ${err instanceof Error ? err.message : String(err)}`);
    });
  }
});
const loadStart = Date.now();
await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
running = false;
clearInterval(sendTimer);
clearInterval(dropTimer);
const relayMetrics = (await (await fetch(`${statusUrl}/metrics`)).text())
  .split('\n')
  .filter((l) => /^relay_(slow_receivers|unjoined_refused|rate_limited|unsent)/.test(l));
abusers.stop();
await Promise.all(drops);
await Promise.all(authLoops);
const loadMs = Date.now() - loadStart;

// Drain: every device present; wait until every receiver has every peer's last message.
const lastSent = new Map(devices.map((d) => [d.id, d.seq - 1]));
const peersOf = (d: Device) =>
  devices.filter((p) => p.room === d.room && p.id !== d.id && p.seq > 0);
const drainUntil = Date.now() + 30_000;
const complete = () =>
  devices.every((d) =>
    peersOf(d).every((p) => (d.last.get(p.id) ?? -1) >= (lastSent.get(p.id) ?? -1)),
  );
while (!complete() && Date.now() < drainUntil)
  await new Promise((resolve) => setTimeout(resolve, 100));

let lost = 0;
for (const d of devices) {
  for (const p of peersOf(d)) {
    const first = d.first.get(p.id);
    const last = lastSent.get(p.id) ?? -1;
    if (first === undefined) {
      lost += last + 1;
      continue;
    }
    lost += Math.max(0, last - (d.last.get(p.id) ?? -1));
  }
}
// Every received message counted once per (receiver, sender) range: a gap shows as out of order.
latencies.sort((a, b) => a - b);
const pct = (q: number) =>
  latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0;
clearInterval(rssTimer);
console.log(
  JSON.stringify(
    {
      seconds: Math.round(loadMs / 1000),
      devices: devices.length,
      rooms,
      sent,
      delivered,
      deliveredPerSecond: Math.round(delivered / (loadMs / 1000)),
      latencyMs: { p50: pct(0.5), p99: pct(0.99), max: latencies.at(-1) ?? 0 },
      lost,
      duplicates,
      outOfOrder,
      authRequests: authOps,
      authErrors,
      errors: errors.length,
      firstErrors: errors.slice(0, 5),
      hostPeakRssMiB: Math.round(peakRssKiB / 1024),
      abusers: { ...abusers.report(), relayMetrics },
    },
    null,
    2,
  ),
);
finished = true;
for (const d of devices) d.socket?.terminate();
await host.stop('SIGTERM', 10_000);
rmSync(dir, { recursive: true, force: true });
process.exit(lost === 0 && duplicates === 0 && outOfOrder === 0 && errors.length === 0 ? 0 : 1);
