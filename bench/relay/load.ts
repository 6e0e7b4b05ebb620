/**
 * Load generator of the relay benchmark, run in its own process (forked by run.ts) so that the
 * relay process's CPU counts only the relay. Commands arrive over IPC; results go back the same way.
 */
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { createRoomId, signDeviceToken } from '../../server/auth/tokens.ts';

export type LoadCommand =
  | {
      kind: 'throughput';
      mode: 'broadcast' | 'direct';
      rooms: number;
      warmupMs: number;
      measureMs: number;
      window: number;
    }
  | { kind: 'latency'; rooms: number; ratePerSecond: number; warmupMs: number; measureMs: number }
  | { kind: 'idle'; connections: number }
  | { kind: 'release' };

export type LoadReport =
  | { kind: 'measuring' }
  | { kind: 'throughput'; received: number; seconds: number }
  | { kind: 'latency'; samples: number; p50Ms: number; p99Ms: number; maxMs: number }
  | { kind: 'idle'; connections: number }
  | { kind: 'released' };

const url = process.env.BENCH_RELAY_URL ?? '';
const secret = process.env.BENCH_RELAY_SECRET ?? '';
const devicesPerRoom = 4;
let nextUser = 1;
let nextDevice = 1;
let held: WebSocket[] = [];

function report(message: LoadReport): void {
  process.send?.(message);
}

interface Member {
  socket: WebSocket;
  device: number;
}

/** Opens a room of four joined devices. */
async function openRoom(): Promise<Member[]> {
  const userId = nextUser++;
  const room = createRoomId(userId, secret);
  const members: Member[] = [];
  for (let i = 0; i < devicesPerRoom; i++) {
    const device = nextDevice++;
    const socket = new WebSocket(url, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => {
        const token = signDeviceToken(
          { userId, deviceId: device, issuedAt: Math.floor(Date.now() / 1000) },
          secret,
          'hmac-sha256',
        );
        socket.send(JSON.stringify({ type: 'join', room, device, token }));
      });
      socket.once('message', (data) => {
        const frame = JSON.parse(String(data)) as { type: string };
        if (frame.type === 'joined') resolve();
        else reject(new Error(`join failed: ${String(data)}`));
      });
      socket.once('error', reject);
    });
    members.push({ socket, device });
  }
  // presence frames of later joiners are still arriving; they are not routed messages
  return members;
}

async function openRooms(count: number): Promise<Member[][]> {
  const rooms: Member[][] = [];
  for (let i = 0; i < count; i++) rooms.push(await openRoom());
  return rooms;
}

function closeRooms(rooms: Member[][]): void {
  for (const room of rooms) for (const member of room) member.socket.terminate();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Closed loop: every device keeps `window` messages in flight, acknowledged by its successor. */
async function throughput(command: Extract<LoadCommand, { kind: 'throughput' }>): Promise<void> {
  const rooms = await openRooms(command.rooms);
  await sleep(200);
  let running = true;
  let counting = false;
  let received = 0;
  const payload = `{"op":"edit","doc":"bench","data":"${'x'.repeat(48)}"}`;
  for (const members of rooms) {
    members.forEach((member, k) => {
      const successor = members[(k + 1) % members.length]!;
      const target = command.mode === 'direct' ? String(successor.device) : '"broadcast"';
      const frame = `{"to":${target},"payload":${payload}}`;
      let inFlight = 0;
      const pump = () => {
        while (running && inFlight < command.window) {
          member.socket.send(frame);
          inFlight++;
        }
      };
      // the successor's receipt of this member's message acknowledges it
      const predecessor = members[(k + members.length - 1) % members.length]!;
      member.socket.on('message', (data: Buffer) => {
        if (data[2] !== 0x66) return; // routed frames start with {"from"
        if (counting) received++;
        const fromEnd = data.indexOf(0x2c, 8);
        if (Number(data.toString('latin1', 8, fromEnd)) === predecessor.device) {
          ack(predecessor.device);
        }
      });
      acks.set(member.device, () => {
        inFlight--;
        pump();
      });
      starters.push(pump);
    });
  }
  for (const start of starters) start();
  await sleep(command.warmupMs);
  counting = true;
  report({ kind: 'measuring' });
  const started = performance.now();
  await sleep(command.measureMs);
  counting = false;
  const seconds = (performance.now() - started) / 1000;
  running = false;
  report({ kind: 'throughput', received, seconds });
  closeRooms(rooms);
  acks.clear();
  starters.length = 0;
}

const acks = new Map<number, () => void>();
const starters: Array<() => void> = [];
function ack(device: number): void {
  acks.get(device)?.();
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

/** Open loop: broadcasts at a fixed rate spread over all devices; latency measured at receipt. */
async function latency(command: Extract<LoadCommand, { kind: 'latency' }>): Promise<void> {
  const rooms = await openRooms(command.rooms);
  await sleep(200);
  const members = rooms.flat();
  const samples: number[] = [];
  let counting = false;
  for (const member of members) {
    member.socket.on('message', (data: Buffer) => {
      if (!counting || data[2] !== 0x66) return;
      const text = data.toString();
      const at = text.indexOf('"t":');
      samples.push(performance.now() - Number(text.slice(at + 4, text.indexOf('}', at))));
    });
  }
  const tickMs = 5;
  const perTick = (command.ratePerSecond * tickMs) / 1000;
  let credit = 0;
  let next = 0;
  const timer = setInterval(() => {
    credit += perTick;
    while (credit >= 1) {
      credit -= 1;
      const member = members[next++ % members.length]!;
      member.socket.send(`{"to":"broadcast","payload":{"t":${performance.now()}}}`);
    }
  }, tickMs);
  await sleep(command.warmupMs);
  counting = true;
  await sleep(command.measureMs);
  counting = false;
  clearInterval(timer);
  await sleep(100);
  const sorted = Float64Array.from(samples).sort();
  report({
    kind: 'latency',
    samples: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
  });
  closeRooms(rooms);
}

async function idle(connections: number): Promise<void> {
  const rooms = await openRooms(Math.ceil(connections / devicesPerRoom));
  held = rooms.flat().map((member) => member.socket);
  await sleep(300);
  report({ kind: 'idle', connections: held.length });
}

process.on('message', (command: LoadCommand) => {
  const run = async () => {
    switch (command.kind) {
      case 'throughput':
        return throughput(command);
      case 'latency':
        return latency(command);
      case 'idle':
        return idle(command.connections);
      case 'release':
        for (const socket of held) socket.terminate();
        held = [];
        report({ kind: 'released' });
        return;
    }
  };
  run().catch((err: unknown) => {
    process.stderr.write(`load generator: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
});
