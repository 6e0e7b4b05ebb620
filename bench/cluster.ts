/**
 * `npm run bench:cluster`: three sync-host relay nodes on one nats-server against three
 * Socket.IO servers on `@socket.io/redis-streams-adapter` and one redis-server, on this machine,
 * same workload. Rooms of 4 devices spread over the 3 nodes (device d of room r on node
 * (r + d) mod 3), so most deliveries cross nodes; device 0 of each room broadcasts at a fixed
 * total rate. Measured: CPU per delivered message of every process of each system (broker
 * included, utime+stime from /proc/<pid>/stat), latency percentiles at that rate, and what a
 * device that dropped gets when it comes back on another node.
 *
 * Options: --rate=<messages sent per second> (400), --rooms=<n> (30), --seconds=<measured> (10).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { io as ioClient, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import { createRoomId } from '../server/tokens.ts';
import { ClusterProcesses, clusterSecret, deviceToken } from '../test/cluster/processes.ts';
import { freePort, startNatsServer } from '../test/helpers/nats-server.ts';

const arg = (name: string, fallback: number): number => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const rate = arg('rate', 400);
const roomCount = arg('rooms', 30);
const measureMs = arg('seconds', 10) * 1000;
const warmupMs = 2_000;
const nodeCount = 3;
const replayCount = 20;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ticksPerSecond = 100; // CLK_TCK on Linux

/** utime + stime of a process in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}
const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);

interface Frame {
  type?: string;
  from?: unknown;
  payload?: { t?: number; n?: number; missed?: number };
  buffered?: number;
  gap?: boolean;
  state?: string;
  device?: number;
}

/** One device of a room, whichever system it is on. */
interface Device {
  broadcast(payload: object): void;
  /** Cuts the connection without a word (the other side sees a transport close). */
  drop(): void;
  close(): void;
  received: Frame[];
  onMessage?: (frame: Frame) => void;
}

/** A running system: its node URLs, every process id (broker included) and its devices. */
interface System {
  name: string;
  urls: string[];
  pids: number[];
  device(url: string, room: number, device: number): Promise<Device>;
  /** A device that dropped comes back on `url`: what it gets, and what the system says. */
  rejoin(
    url: string,
    room: number,
    device: number,
    old: Device,
  ): Promise<Device & { note: string }>;
  stop(): Promise<void>;
}

const rooms = new Map<number, string>();
const roomId = (r: number): string => {
  const id = rooms.get(r) ?? createRoomId(1000 + r, clusterSecret);
  rooms.set(r, id);
  return id;
};

function syncHostDevice(url: string, r: number, d: number): Promise<Device & { joined: Frame }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const device: Device & { joined: Frame } = {
      joined: {},
      received: [],
      broadcast: (payload) => socket.send(JSON.stringify({ to: 'broadcast', payload })),
      drop: () => socket.terminate(),
      close: () => socket.close(),
    };
    socket.on('open', () =>
      socket.send(
        JSON.stringify({
          type: 'join',
          room: roomId(r),
          device: d,
          token: deviceToken(1000 + r, d),
        }),
      ),
    );
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      if (frame.type === 'joined') {
        device.joined = frame;
        resolve(device);
      } else if (frame.type === 'error') reject(new Error(String(data)));
      else if (frame.from !== undefined) {
        device.received.push(frame);
        device.onMessage?.(frame);
      }
    });
    socket.on('close', (code) => reject(new Error(`closed ${code}`)));
    socket.on('error', reject);
  });
}

async function syncHost(): Promise<System> {
  const nats = await startNatsServer();
  const processes = new ClusterProcesses();
  const conf = { 'buffer.seconds': 60, 'rate.perSecond': 100_000, 'rate.burst': 100_000 };
  const nodes = await processes.relayNodes(nats.url, nodeCount, conf);
  await sleep(2_000);
  return {
    name: 'sync-host (3 nodes + nats-server)',
    urls: nodes.map((n) => n.url),
    pids: [nats.pid as number, ...nodes.map((n) => n.process.child.pid as number)],
    device: syncHostDevice,
    async rejoin(url, r, d) {
      const device = await syncHostDevice(url, r, d);
      const { buffered, gap } = device.joined;
      return Object.assign(device, { note: `joined: buffered ${buffered}, gap ${gap}` });
    },
    async stop() {
      await processes.dispose();
      await nats.dispose();
    },
  };
}

function sioDevice(
  url: string,
  r: number,
  d: number,
  auth?: { pid: string; offset: string },
): Promise<Device & { socket: Socket }> {
  return new Promise((resolve, reject) => {
    const socket = ioClient(url, {
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      ...(auth ? { auth } : {}),
    });
    const device: Device & { socket: Socket } = {
      socket,
      received: [],
      broadcast: (payload) => socket.emit('m', 'broadcast', payload),
      drop: () => socket.io.engine.close(),
      close: () => socket.disconnect(),
    };
    socket.on('m', (frame: Frame) => {
      device.received.push(frame);
      device.onMessage?.(frame);
    });
    socket.on('connect_error', reject);
    socket.on('connect', () => {
      if (auth !== undefined) {
        resolve(device);
        return;
      }
      socket.emit('join', { room: roomId(r), device: d }, () => resolve(device));
    });
  });
}

async function socketIo(): Promise<System> {
  const port = await freePort();
  const redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  await sleep(500);
  const servers: ChildProcess[] = [];
  const urls: string[] = [];
  for (let i = 0; i < nodeCount; i++) {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, 'reference/socket-io-cluster.ts'),
        `redis://127.0.0.1:${port}`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    servers.push(child);
    urls.push(
      await new Promise<string>((resolve, reject) => {
        child.stdout?.on('data', (chunk: Buffer) => {
          const m = /listening (\d+)/.exec(chunk.toString());
          if (m) resolve(`http://127.0.0.1:${m[1]}`);
        });
        child.once('exit', (code) => reject(new Error(`socket.io server exited ${code}`)));
      }),
    );
  }
  return {
    name: 'Socket.IO (3 servers + redis-server, redis-streams-adapter)',
    urls,
    pids: [redis.pid as number, ...servers.map((s) => s.pid as number)],
    device: sioDevice,
    async rejoin(url, r, d, old) {
      // what the client library does on its own reconnect, but to another server
      const s = (old as Device & { socket: Socket }).socket as unknown as {
        _pid?: string;
        _lastOffset?: string;
      };
      if (s._pid === undefined || s._lastOffset === undefined) {
        const device = await sioDevice(url, r, d);
        return Object.assign(device, { note: 'no session to recover (nothing received yet)' });
      }
      const device = await sioDevice(url, r, d, { pid: s._pid, offset: s._lastOffset });
      // the server answers with the same session id when it recovered the session (the
      // client's own `recovered` flag is only set on a reconnect of the same socket object)
      const now = (device.socket as unknown as { _pid?: string })._pid;
      return Object.assign(device, { note: `session recovered: ${now === s._pid}` });
    },
    async stop() {
      for (const s of servers) s.kill('SIGTERM');
      await sleep(500);
      for (const s of servers) if (s.exitCode === null) s.kill('SIGKILL');
      redis.kill('SIGTERM');
    },
  };
}

interface Result {
  name: string;
  sent: number;
  delivered: number;
  cpu: number;
  p50: number;
  p99: number;
  replay: string;
}

async function measure(system: System): Promise<Result> {
  const devices: Device[][] = [];
  for (let r = 0; r < roomCount; r++) {
    const room: Device[] = [];
    for (let d = 0; d < 4; d++) {
      room.push(await system.device(system.urls[(r + d) % nodeCount]!, r, d + 1));
    }
    devices.push(room);
  }
  await sleep(1_000);
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  const latencies: number[] = [];
  for (const room of devices) {
    for (const device of room.slice(1)) {
      device.onMessage = (frame) => {
        const t = frame.payload?.t;
        if (t !== undefined && t >= windowStart && t < windowEnd) {
          latencies.push(performance.now() - t);
        }
      };
    }
  }
  let sent = 0;
  let next = 0;
  const tickMs = 20;
  const perTick = (rate * tickMs) / 1000;
  let owed = 0;
  const timer = setInterval(() => {
    owed += perTick;
    for (; owed >= 1; owed--) {
      const room = devices[next++ % roomCount]!;
      room[0]!.broadcast({ t: performance.now(), n: next });
      if (performance.now() >= windowStart && performance.now() < windowEnd) sent++;
    }
  }, tickMs);
  await sleep(warmupMs);
  windowStart = performance.now();
  windowEnd = windowStart + measureMs;
  const cpu0 = cpuOf(system.pids);
  await sleep(measureMs);
  const cpu1 = cpuOf(system.pids);
  clearInterval(timer);
  await sleep(2_000);
  latencies.sort((a, b) => a - b);
  const at = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;

  // Replay: device 2 of room 0 drops from its node, 20 broadcasts follow, it comes back on
  // the next node.
  const room = devices[0]!;
  const dropped = room[1]!;
  dropped.drop();
  await sleep(1_500);
  for (let i = 0; i < replayCount; i++) room[0]!.broadcast({ missed: i });
  await sleep(1_000);
  const back = await system.rejoin(system.urls[2 % nodeCount]!, 0, 2, dropped);
  await sleep(2_000);
  const missed = back.received.flatMap((f) =>
    f.payload?.missed === undefined ? [] : [f.payload.missed],
  );
  const inOrder = missed.every((m, i) => m === i);
  const replay = `${missed.length}/${replayCount} missed messages after a reconnect to another node${
    missed.length > 0 ? (inOrder ? ', once and in order' : ' (not once in order)') : ''
  } (${back.note})`;

  for (const r of devices) for (const d of r) d.close();
  back.close();
  return {
    name: system.name,
    sent,
    delivered: latencies.length,
    cpu: cpu1 - cpu0,
    p50: at(0.5),
    p99: at(0.99),
    replay,
  };
}

const results: Result[] = [];
for (const start of [syncHost, socketIo]) {
  const system = await start();
  try {
    results.push(await measure(system));
  } finally {
    await system.stop();
  }
}
console.log(
  `\nCluster bench: ${nodeCount} nodes each, ${roomCount} rooms of 4 devices spread over the nodes, ` +
    `one broadcaster per room, ${rate} messages/s in all, ${measureMs / 1000} s measured`,
);
console.log(
  '| system | delivered/s | CPU µs per delivered message (all processes) | p50 ms | p99 ms |',
);
console.log('| --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(
    `| ${r.name} | ${Math.round(r.delivered / (measureMs / 1000))} | ${((r.cpu / r.delivered) * 1e6).toFixed(1)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} |`,
  );
}
const [a, b] = results;
if (a !== undefined && b !== undefined) {
  const ratio = b.cpu / b.delivered / (a.cpu / a.delivered);
  console.log(`\nCPU per message, Socket.IO / sync-host in this run: ${ratio.toFixed(2)}x`);
}
console.log('\nReplay after a reconnect to another node:');
for (const r of results) console.log(`- ${r.name}: ${r.replay}`);
process.exit(0);
