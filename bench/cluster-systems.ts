/**
 * The two systems of `npm run bench:cluster`, started the same way: three sync-host relay nodes
 * on one nats-server, and three Socket.IO servers on `@socket.io/redis-streams-adapter` and one
 * redis-server. Each gives its node URLs, the ids of all its processes (broker first) and a way
 * to connect a device of a room to a node.
 *
 * `BENCH_CPU_PROF=cluster`: every node process of both systems runs with `--cpu-prof` and is
 * stopped with SIGTERM, so that its whole-life CPU profile lands in bench/profiles/cluster-*
 * (read them with `tsx bench/profile-summary.ts <file>`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { io as ioClient, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import { createRoomId } from '../server/tokens.ts';
import { ClusterProcesses, clusterSecret, deviceToken } from '../test/cluster/processes.ts';
import { startNatsServer } from '../test/helpers/nats-server.ts';
import { freePort } from '../test/helpers/ports.ts';
import { type TeamJoin, teamRooms } from './cluster-team.ts';

export const nodeCount = 3;
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ticksPerSecond = 100; // CLK_TCK on Linux
/** `buffer.seconds` of sync-host and `maxDisconnectionDuration` of Socket.IO: the same window. */
export const windowSeconds = 60;

/** utime + stime of a process in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}
export const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);

/** Node options of a profiled process, or none. */
function profileOptions(name: string): string[] {
  if (process.env.BENCH_CPU_PROF !== 'cluster') return [];
  const dir = join(import.meta.dirname, 'profiles', `cluster-${name}`);
  mkdirSync(dir, { recursive: true });
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

export interface Frame {
  type?: string;
  from?: unknown;
  payload?: { t?: number; n?: number; missed?: number };
  buffered?: number;
  gap?: boolean;
}

/** One device of a room, whichever system it is on. */
export interface Device {
  broadcast(payload: object): void;
  /** Cuts the connection without a word (the other side sees a transport close). */
  drop(): void;
  close(): void;
  received: Frame[];
  onMessage?: (frame: Frame) => void;
}

/** A running system: its node URLs, every process id (broker first) and its devices. */
export interface System {
  name: string;
  urls: string[];
  /** The broker's process id first (nats-server, redis-server), then the nodes'. */
  pids: number[];
  device(url: string, room: number, device: number): Promise<Device>;
  /**
   * Sets up `count` shared rooms of {@link teamUsers} users with {@link devicesPerUser} devices
   * each (sync-host: through the auth API, the members joining on their grants); then
   * `teamDevice(url, s, k)` joins device k of shared room s.
   */
  prepareTeams(count: number): Promise<void>;
  teamDevice(url: string, room: number, device: number): Promise<Device>;
  /** A device that dropped comes back on `url`: what it gets, and what the system says. */
  rejoin(
    url: string,
    room: number,
    device: number,
    old: Device,
  ): Promise<Device & { note: string }>;
  stop(): Promise<void>;
}

/**
 * Sends of one device carry the client library's envelope (`_sync`: its session and a counter),
 * as every payload of the library does by default: sync-host gives each a JetStream message id.
 */
function envelope(): (payload: object) => object {
  const s = randomBytes(9).toString('base64url');
  let n = 0;
  return (payload) => ({ ...payload, _sync: { s, n: ++n } });
}

/** Socket.IO's shared rooms are its rooms from this number on (the one-user rooms are below). */
const teamRoomBase = 10_000;
const rooms = new Map<number, string>();
const roomId = (r: number): string => {
  const id = rooms.get(r) ?? createRoomId(1000 + r, clusterSecret);
  rooms.set(r, id);
  return id;
};

/** A device's join of a sync-host room: the room, the device, its token and a member's grant. */
type SyncHostJoin = TeamJoin;

/** Device `d` of one-user room `r`: a token signed with the cluster's secret for user 1000 + r. */
const ownJoin = (r: number, d: number): SyncHostJoin => ({
  room: roomId(r),
  device: d,
  token: deviceToken(1000 + r, d),
});

function syncHostDevice(url: string, join: SyncHostJoin): Promise<Device & { joined: Frame }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const wrap = envelope();
    const device: Device & { joined: Frame } = {
      joined: {},
      received: [],
      broadcast: (payload) =>
        socket.send(JSON.stringify({ to: 'broadcast', payload: wrap(payload) })),
      drop: () => socket.terminate(),
      close: () => socket.close(),
    };
    socket.on('open', () => socket.send(JSON.stringify({ type: 'join', ...join })));
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

export async function syncHost(): Promise<System> {
  const nats = await startNatsServer();
  const processes = new ClusterProcesses();
  const conf = {
    'buffer.seconds': windowSeconds,
    'rate.perSecond': 100_000,
    'rate.burst': 100_000,
  };
  const nodes = await processes.relayNodes(nats.url, nodeCount, conf, profileOptions('sync-host'));
  await sleep(2_000);
  let teams: TeamJoin[][] = [];
  return {
    name: 'sync-host (3 nodes + nats-server)',
    urls: nodes.map((n) => n.url),
    pids: [nats.pid as number, ...nodes.map((n) => n.process.child.pid as number)],
    device: (url, r, d) => syncHostDevice(url, ownJoin(r, d)),
    async prepareTeams(count) {
      // Every user on team; nobody is the host's owner. Started after the one-user rooms'
      // joins and rejoins: its device checks would refuse their devices, which it never issued.
      // Idle while messages flow, so its CPU is not counted.
      const auth = await processes.authProcess(nats.url, {
        DEFAULT_TIER: 'team',
        OWNER_EMAIL: 'nobody@bench.example',
      });
      teams = await teamRooms(auth, count);
    },
    teamDevice: (url, s, k) => syncHostDevice(url, teams[s]?.[k] as TeamJoin),
    async rejoin(url, r, d) {
      const device = await syncHostDevice(url, ownJoin(r, d));
      const { buffered, gap } = device.joined;
      return Object.assign(device, { note: `joined: buffered ${buffered}, gap ${gap}` });
    },
    async stop() {
      // SIGTERM first: a profiled node writes its profile on a clean exit
      await Promise.all(nodes.map((n) => n.process.stop('SIGTERM', 10_000).catch(() => null)));
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
    const wrap = envelope();
    const device: Device & { socket: Socket } = {
      socket,
      received: [],
      broadcast: (payload) => socket.emit('m', 'broadcast', wrap(payload)),
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

export async function socketIo(): Promise<System> {
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
        ...profileOptions('socket-io'),
        '--import',
        'tsx',
        join(import.meta.dirname, 'reference/socket-io-cluster.ts'),
        `redis://127.0.0.1:${port}`,
        String(windowSeconds * 1000),
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
    async prepareTeams() {},
    // the same rooms of 9 devices (Socket.IO has no users: only the room and the device)
    teamDevice: (url, s, k) => sioDevice(url, teamRoomBase + s, k + 1),
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
      await sleep(2_000);
      for (const s of servers) if (s.exitCode === null) s.kill('SIGKILL');
      redis.kill('SIGTERM');
    },
  };
}
