/**
 * The load generator, run in its own process (forked by bench/run.ts) so that the server's CPU
 * counts only the server. Speaks our JSON frames (relay and bare-ws reference) or Socket.IO.
 * Devices sit in rooms of 4. Commands arrive over IPC; reports go back the same way.
 */
import { performance } from 'node:perf_hooks';
import { type Socket as IoSocket, io as ioClient } from 'socket.io-client';
import { WebSocket } from 'ws';
import { createRoomId, signDeviceToken } from '../server/tokens.ts';
import { addSample, type Histogram } from './histogram.ts';
import {
  benchSecret,
  type DeviceGroup,
  type Dialect,
  type LoadCommand,
  type LoadReport,
} from './protocol.ts';

const devicesPerRoom = 4;
/** Frames protocol: routed frames start with `{"from":` and the numeric id starts at byte 8. */
const F = 0x66;

/** One device, whatever the dialect. */
interface Peer {
  device: number;
  room: Peer[];
  /** Sends a routed message; `payload` is JSON text. */
  send(to: string | number, payload: string): void;
  /** Called with the sender's device id and, for latency probes, the send time. */
  onRouted: ((from: number, frameText: () => string) => void) | undefined;
  bufferedAmount(): number;
  close(): void;
  /** Closes with a close handshake: resolves once the server answered it. */
  leave(): Promise<void>;
  /** Milliseconds from the join frame sent to `joined` received. */
  joinMs: number;
}

let nextUser = 1;
let nextDevice = 1;
let rooms: Peer[][] = [];
let running = false;
/** The groups of `connect-groups`, in the order of their rooms, and their server. */
let groups: DeviceGroup[] = [];
let groupsUrl = '';
let stopRequested: (() => void) | undefined;

function report(message: LoadReport): void {
  process.send?.(message);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function openFramesPeer(
  url: string,
  room: string,
  device: number,
  token: string,
  grant?: string,
): Promise<Peer> {
  // wss:// (BENCH_TLS=1): the bench's own self-signed certificate.
  const socket = new WebSocket(url, { perMessageDeflate: false, rejectUnauthorized: false });
  let joinSentAt = 0;
  const peer: Peer = {
    device,
    room: [],
    send: (to, payload) =>
      socket.send(`{"to":${typeof to === 'number' ? to : `"${to}"`},"payload":${payload}}`),
    onRouted: undefined,
    bufferedAmount: () => socket.bufferedAmount,
    close: () => socket.terminate(),
    leave: () =>
      new Promise((resolve) => {
        socket.once('close', () => resolve());
        socket.close();
      }),
    joinMs: 0,
  };
  return new Promise<Peer>((resolve, reject) => {
    socket.once('open', () => {
      joinSentAt = performance.now();
      socket.send(JSON.stringify({ type: 'join', room, device, token, grant }));
    });
    socket.once('error', reject);
    socket.once('message', (data: Buffer) => {
      peer.joinMs = performance.now() - joinSentAt;
      if (!String(data).includes('"joined"')) {
        reject(new Error(`join failed: ${String(data)}`));
        return;
      }
      socket.on('message', (frame: Buffer) => {
        if (frame[2] !== F || peer.onRouted === undefined) return;
        const fromEnd = frame.indexOf(0x2c, 8);
        peer.onRouted(Number(frame.toString('latin1', 8, fromEnd)), () => frame.toString());
      });
      resolve(peer);
    });
  });
}

interface IoFrame {
  from: number;
  payload: { t?: number };
}

function openIoPeer(url: string, room: string, device: number): Promise<Peer> {
  const socket: IoSocket = ioClient(url, {
    transports: ['websocket'],
    forceNew: true,
    reconnection: false,
  });
  const peer: Peer = {
    device,
    room: [],
    send: (to, payload) => socket.emit('m', to, JSON.parse(payload)),
    onRouted: undefined,
    bufferedAmount: () => 0,
    close: () => socket.disconnect(),
    leave: async () => {
      socket.disconnect();
    },
    joinMs: 0,
  };
  socket.on('m', (frame: IoFrame) => {
    peer.onRouted?.(frame.from, () => `"t":${frame.payload.t}}`);
  });
  return new Promise<Peer>((resolve, reject) => {
    socket.once('connect_error', reject);
    socket.once('connect', () => {
      socket.emit('join', { room, device }, () => resolve(peer));
    });
  });
}

async function openRoom(dialect: Dialect, url: string): Promise<Peer[]> {
  const userId = nextUser++;
  const room = createRoomId(userId, benchSecret);
  const members: Peer[] = [];
  for (let i = 0; i < devicesPerRoom; i++) {
    const device = nextDevice++;
    const token = signDeviceToken(
      { userId, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
      benchSecret,
      'hmac-sha256',
    );
    members.push(
      dialect === 'sio'
        ? await openIoPeer(url, room, device)
        : await openFramesPeer(url, room, device, token),
    );
  }
  for (const member of members) member.room = members;
  return members;
}

async function connect(command: Extract<LoadCommand, { kind: 'connect' }>): Promise<void> {
  const started = performance.now();
  const count = Math.ceil(command.connections / devicesPerRoom);
  const opened: Peer[][] = [];
  // a few rooms at a time: fast, without a SYN flood on the listen backlog
  const parallel = 16;
  for (let i = 0; i < count; i += parallel) {
    const batch = Math.min(parallel, count - i);
    opened.push(
      ...(await Promise.all(
        Array.from({ length: batch }, () => openRoom(command.dialect, command.url)),
      )),
    );
  }
  // the last device joined: the set-up time (the settling below is not part of it)
  const seconds = (performance.now() - started) / 1000;
  // added to the devices already open (the memory bench connects twice); `release` closes all
  rooms.push(...opened);
  await sleep(200); // presence frames of later joiners settle
  report({ kind: 'connected', connections: opened.length * devicesPerRoom, seconds });
}

/** Each group's devices joined, one after the other, as one room (the shared-room case). */
async function connectGroups(command: Extract<LoadCommand, { kind: 'connect-groups' }>) {
  const started = performance.now();
  let connections = 0;
  for (const group of command.groups) {
    const members: Peer[] = [];
    for (const { device, token, grant } of group.devices) {
      members.push(await openFramesPeer(command.url, group.room, device, token, grant));
    }
    for (const member of members) member.room = members;
    rooms.push(members);
    connections += members.length;
  }
  const seconds = (performance.now() - started) / 1000;
  await sleep(200);
  report({ kind: 'connected', connections, seconds });
}

/**
 * Each device of one room leaves (close handshake, so the relay took the departure) and joins
 * again on a new connection, one at a time, `rounds` times over; the time of each join.
 */
async function rejoin(command: Extract<LoadCommand, { kind: 'rejoin' }>, groups: DeviceGroup[]) {
  const members = rooms[command.room] as Peer[];
  const group = groups[command.room] as DeviceGroup;
  const joinMs: number[] = [];
  for (let round = 0; round < command.rounds; round++) {
    for (let k = 0; k < members.length; k++) {
      await (members[k] as Peer).leave();
      const { device, token, grant } = group.devices[k] as DeviceGroup['devices'][number];
      const peer = await openFramesPeer(groupsUrl, group.room, device, token, grant);
      peer.room = members;
      members[k] = peer;
      joinMs.push(peer.joinMs);
    }
  }
  report({ kind: 'rejoined', joinMs });
}

/** The routed payload: an edit whose `data` pads it to `bytes` (default: ~80 bytes in all). */
function editPayload(bytes?: number): string {
  const frame = '{"op":"edit","doc":"bench","data":""}';
  return `{"op":"edit","doc":"bench","data":"${'x'.repeat(bytes === undefined ? 48 : Math.max(0, bytes - frame.length))}"}`;
}

function waitForStop(): Promise<void> {
  return new Promise((resolve) => {
    stopRequested = resolve;
  });
}

/** Closed loop: every device keeps `window` messages in flight, acknowledged by its successor. */
async function throughput(command: Extract<LoadCommand, { kind: 'throughput' }>): Promise<void> {
  running = true;
  let counting = false;
  let received = 0;
  const payload = editPayload(command.payloadBytes);
  const starters: Array<() => void> = [];
  const acks = new Map<number, () => void>();
  let outstanding = 0;
  const sending = command.room === undefined ? rooms : [rooms[command.room] as Peer[]];
  for (const members of sending) {
    members.forEach((member, k) => {
      const successor = members[(k + 1) % members.length] as Peer;
      const predecessor = members[(k + members.length - 1) % members.length] as Peer;
      const to = command.mode === 'direct' ? successor.device : 'broadcast';
      let inFlight = 0;
      const pump = () => {
        while (running && inFlight < command.window) {
          member.send(to, payload);
          inFlight++;
          outstanding++;
        }
      };
      member.onRouted = (from) => {
        if (counting) received++;
        if (from === predecessor.device) acks.get(from)?.();
      };
      acks.set(member.device, () => {
        inFlight--;
        outstanding--;
        pump();
      });
      starters.push(pump);
    });
  }
  for (const start of starters) start();
  await sleep(command.warmupMs);
  counting = true;
  const started = performance.now();
  const stopped = waitForStop();
  report({ kind: 'measuring' });
  await stopped;
  counting = false;
  const seconds = (performance.now() - started) / 1000;
  running = false;
  // drain what is in flight before the next phase (bounded: a lost ack must not hang the run)
  const drainUntil = performance.now() + 10_000;
  await sleep(100);
  while (outstanding > 0 && performance.now() < drainUntil) await sleep(50);
  for (const member of rooms.flat()) member.onRouted = undefined;
  await sleep(200);
  report({ kind: 'stopped', received, seconds });
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

/** Open loop: broadcasts at a fixed rate spread over all devices, timed at each receipt. */
async function latency(command: Extract<LoadCommand, { kind: 'latency' }>): Promise<void> {
  const members = rooms.flat();
  const samples: number[] = [];
  let counting = false;
  for (const member of members) {
    member.onRouted = (_from, text) => {
      if (!counting) return;
      const frame = text();
      const at = frame.indexOf('"t":');
      samples.push(performance.now() - Number(frame.slice(at + 4, frame.indexOf('}', at))));
    };
  }
  const tickMs = 1;
  let last = performance.now();
  let credit = 0;
  let next = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    credit += ((now - last) * command.ratePerSecond) / 1000;
    last = now;
    while (credit >= 1) {
      credit -= 1;
      const member = members[next++ % members.length] as Peer;
      member.send('broadcast', `{"t":${performance.now()}}`);
    }
  }, tickMs);
  await sleep(command.warmupMs);
  counting = true;
  await sleep(command.measureMs);
  counting = false;
  clearInterval(timer);
  await sleep(200);
  for (const member of members) member.onRouted = undefined;
  const sorted = Float64Array.from(samples).sort();
  const histogram: Histogram = {};
  for (const ms of sorted) addSample(histogram, ms);
  report({
    kind: 'latency',
    histogram,
    samples: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
  });
}

/**
 * Durable buffer: in every room all but one device drop without leave; the remaining one then
 * sends `perSender` broadcasts as fast as its socket drains, each stored for every absent device.
 */
async function buffer(command: Extract<LoadCommand, { kind: 'buffer' }>): Promise<void> {
  const senders: Peer[] = [];
  for (const members of rooms) {
    for (const member of members.slice(devicesPerRoom - command.absentPerRoom)) member.close();
    senders.push(members[0] as Peer);
  }
  await sleep(500);
  const payload = editPayload();
  let left = command.perSender;
  report({ kind: 'measuring' });
  await new Promise<void>((resolve) => {
    const pump = () => {
      for (let i = 0; i < 64 && left > 0; i++, left--) {
        for (const sender of senders) sender.send('broadcast', payload);
      }
      if (left > 0) setImmediate(pump);
      else resolve();
    };
    pump();
  });
  report({ kind: 'sent', messages: command.perSender * senders.length });
}

process.on('message', (command: LoadCommand) => {
  const run = async () => {
    switch (command.kind) {
      case 'connect':
        return connect(command);
      case 'connect-groups':
        groups = command.groups;
        groupsUrl = command.url;
        return connectGroups(command);
      case 'rejoin':
        return rejoin(command, groups);
      case 'throughput':
        return throughput(command);
      case 'latency':
        return latency(command);
      case 'buffer':
        return buffer(command);
      case 'stop':
        stopRequested?.();
        stopRequested = undefined;
        return;
      case 'release':
        for (const member of rooms.flat()) member.close();
        rooms = [];
        await sleep(300);
        report({ kind: 'released' });
        return;
    }
  };
  run().catch((err: unknown) => {
    process.stderr.write(`load generator: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
});
