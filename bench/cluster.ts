/**
 * `npm run bench:cluster`: three sync-host relay nodes on one nats-server against three
 * Socket.IO servers on `@socket.io/redis-streams-adapter` and one redis-server, on this machine,
 * same workload. Rooms of 4 devices spread over the 3 nodes (device d of room r on node
 * (r + d) mod 3), so most deliveries cross nodes; device 0 of each room broadcasts at a fixed
 * total rate. Measured: CPU per delivered message of every process of each system (broker
 * included, utime+stime from /proc/<pid>/stat; broker, nodes and the load process apart),
 * latency percentiles at that rate, what a device that dropped gets when it comes back on
 * another node, and the same after a late reconnect: away while more messages than the
 * Socket.IO adapter's `maxLen` passed in other rooms, within both systems' time window. Then
 * shared rooms (bench/cluster-team.ts): a project shared by its owner with two editors, 3
 * devices of each user, one on every node, set up through an auth process's API on sync-host
 * (the members join on their room grants) and as rooms of 9 on Socket.IO; every device
 * broadcasts in turn.
 *
 * Options: --rate=<messages sent per second> (400), --rooms=<n> (30), --seconds=<measured> (10),
 * --late=<messages in other rooms while away> (12000), --teams=<shared rooms> (10; 0: none),
 * --team-rate=<messages per second in them> (150), --only=sync-host|socket-io.
 */

import {
  cpuOf,
  type Device,
  nodeCount,
  type System,
  sleep,
  socketIo,
  syncHost,
  windowSeconds,
} from './cluster-systems.ts';
import { devicesPerUser, teamUsers } from './cluster-team.ts';

const arg = (name: string, fallback: number): number => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const rate = arg('rate', 400);
const roomCount = arg('rooms', 30);
const measureMs = arg('seconds', 10) * 1000;
const lateCount = arg('late', 12_000);
const teamCount = arg('teams', 10);
/** Messages per second in the shared rooms: 8 receivers each, as many deliveries as above. */
const teamRate = arg('team-rate', 150);
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const warmupMs = 2_000;
const replayCount = 20;
const teamSize = teamUsers * devicesPerUser;
/** Rate of the traffic in other rooms while the late device is away. */
const lateRate = 1_000;

/** CPU seconds of this process (the load: every device of the bench). */
const loadCpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

interface Result {
  name: string;
  delivered: number;
  /** CPU seconds over the window: the broker, the nodes, and the load process. */
  cpu: { broker: number; nodes: number; load: number };
  p50: number;
  p99: number;
  replay: Rejoin;
  late: Rejoin;
  /** The shared rooms' window (absent with --teams=0). */
  shared: Pick<Result, 'delivered' | 'cpu' | 'p50' | 'p99'> | undefined;
}

/** What a device that came back got of the `replayCount` messages it missed, and what it was told. */
interface Rejoin {
  replayed: number;
  inOrder: boolean;
  note: string;
  awaySeconds: number;
}

const describe = (r: Rejoin) =>
  `${r.replayed}/${replayCount}${r.replayed > 0 ? (r.inOrder ? ' once, in order' : ' NOT once in order') : ''}; ${r.note}`;

/** Broadcasts `count` messages at `perSecond` from the devices `sender` chooses. */
async function pace(
  count: number,
  perSecond: number,
  sender: (i: number) => Device,
): Promise<void> {
  const tickMs = 20;
  const perTick = (perSecond * tickMs) / 1000;
  let owed = 0;
  for (let sent = 0; sent < count; ) {
    owed += perTick;
    for (; owed >= 1 && sent < count; owed--, sent++) {
      sender(sent).broadcast({ t: performance.now(), n: sent });
    }
    await sleep(tickMs);
  }
}

/** Device 0 of the rooms `pick` chooses. */
const firstOf = (devices: Device[][], pick: (i: number) => number) => (i: number) =>
  devices[pick(i)]![0]!;

/** What one measured window of a system gave. */
type Window = Pick<Result, 'delivered' | 'cpu' | 'p50' | 'p99'>;

/**
 * Every device of `devices` but the sender counts what it receives sent within the window;
 * broadcasts at `perSecond` from the devices `sender` chooses: 2 s of warm-up, then the window.
 */
async function measureWindow(
  system: System,
  devices: Device[][],
  perSecond: number,
  sender: (i: number) => Device,
): Promise<Window> {
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  const latencies: number[] = [];
  for (const room of devices) {
    for (const device of room) {
      device.onMessage = (frame) => {
        const t = frame.payload?.t;
        if (t !== undefined && t >= windowStart && t < windowEnd) {
          latencies.push(performance.now() - t);
        }
      };
    }
  }
  const load = pace(Math.round((perSecond * (warmupMs + measureMs)) / 1000), perSecond, sender);
  await sleep(warmupMs);
  windowStart = performance.now();
  windowEnd = windowStart + measureMs;
  const [broker, ...nodes] = system.pids as [number, ...number[]];
  const before = { broker: cpuOf([broker]), nodes: cpuOf(nodes), load: loadCpu() };
  await sleep(measureMs);
  const cpu = {
    broker: cpuOf([broker]) - before.broker,
    nodes: cpuOf(nodes) - before.nodes,
    load: loadCpu() - before.load,
  };
  await load;
  await sleep(2_000);
  latencies.sort((a, b) => a - b);
  const at = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;
  for (const room of devices) for (const device of room) device.onMessage = undefined;
  return { delivered: latencies.length, cpu, p50: at(0.5), p99: at(0.99) };
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
  const own = await measureWindow(
    system,
    devices,
    rate,
    firstOf(devices, (i) => i % roomCount),
  );
  const replay = await dropAndRejoin(system, devices, 0, 0);
  const late = await dropAndRejoin(system, devices, 1, lateCount);
  for (const r of devices) for (const d of r) d.close();
  const shared = teamCount > 0 ? await measureTeams(system) : undefined;
  return { name: system.name, ...own, replay, late, shared };
}

/**
 * The shared rooms: device k of shared room s (user k / 3's device k % 3) on node (s + k) mod 3,
 * so each user has a device on every node; every device of a room broadcasts in turn.
 */
async function measureTeams(system: System): Promise<Window> {
  await system.prepareTeams(teamCount);
  const devices: Device[][] = [];
  for (let s = 0; s < teamCount; s++) {
    const room: Device[] = [];
    for (let k = 0; k < teamSize; k++) {
      room.push(await system.teamDevice(system.urls[(s + k) % nodeCount]!, s, k));
    }
    devices.push(room);
  }
  await sleep(1_000);
  const sender = (i: number) => devices[i % teamCount]![Math.floor(i / teamCount) % teamSize]!;
  const window = await measureWindow(system, devices, teamRate, sender);
  for (const r of devices) for (const d of r) d.close();
  return window;
}

/**
 * Device 2 of room `r` drops without a word from its node; `replayCount` broadcasts follow in
 * its room, then `elsewhere` broadcasts in the other rooms; it comes back on the next node.
 */
async function dropAndRejoin(
  system: System,
  devices: Device[][],
  r: number,
  elsewhere: number,
): Promise<Rejoin> {
  const room = devices[r]!;
  const dropped = room[1]!;
  dropped.drop();
  const awaySince = performance.now();
  await sleep(1_500);
  for (let i = 0; i < replayCount; i++) room[0]!.broadcast({ missed: i });
  const others = devices.length - 1;
  await pace(
    elsewhere,
    lateRate,
    firstOf(devices, (i) => (r + 1 + (i % others)) % devices.length),
  );
  await sleep(1_000);
  const back = await system.rejoin(system.urls[(r + 2) % nodeCount]!, r, 2, dropped);
  const awaySeconds = (performance.now() - awaySince) / 1000;
  await sleep(2_000);
  back.close();
  const missed = back.received.flatMap((f) =>
    f.payload?.missed === undefined ? [] : [f.payload.missed],
  );
  const inOrder = missed.every((m, i) => m === i);
  return { replayed: missed.length, inOrder, note: back.note, awaySeconds };
}

const results: Result[] = [];
const systems = { 'sync-host': syncHost, 'socket-io': socketIo };
for (const [key, start] of Object.entries(systems)) {
  if (only !== undefined && only !== key) continue;
  const system = await start();
  try {
    results.push(await measure(system));
  } finally {
    await system.stop();
  }
}
type Row = Pick<Result, 'name' | 'delivered' | 'cpu' | 'p50' | 'p99'>;
const perMessage = (seconds: number, r: Row) => ((seconds / r.delivered) * 1e6).toFixed(1);
const total = (r: Row) => (r.cpu.broker + r.cpu.nodes) / r.delivered;

/** The table of one workload for every system, and sync-host's CPU per message ÷ Socket.IO's. */
function table(title: string, rows: Row[]): void {
  console.log(`\n${title}`);
  console.log(
    '| system | delivered/s | CPU µs per delivered message (broker + nodes) | broker | nodes | load process (not counted) | p50 ms | p99 ms |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${Math.round(r.delivered / (measureMs / 1000))} | ${perMessage(r.cpu.broker + r.cpu.nodes, r)} | ${perMessage(r.cpu.broker, r)} | ${perMessage(r.cpu.nodes, r)} | ${perMessage(r.cpu.load, r)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} |`,
    );
  }
  const [a, b] = rows;
  if (a === undefined || b === undefined) return;
  console.log(
    `\nCPU per message in this run: sync-host / Socket.IO ${(total(a) / total(b)).toFixed(2)}x (Socket.IO / sync-host ${(total(b) / total(a)).toFixed(2)}x)`,
  );
}

table(
  `Cluster bench: ${nodeCount} nodes each, ${roomCount} rooms of 4 devices of one user spread over the nodes, ` +
    `one broadcaster per room, ${rate} messages/s in all, ${measureMs / 1000} s measured`,
  results,
);
const shared = results.flatMap((r) =>
  r.shared === undefined ? [] : [{ ...r.shared, name: r.name }],
);
if (shared.length > 0) {
  table(
    `Shared rooms: ${teamCount} rooms of ${teamUsers} users × ${devicesPerUser} devices (a project shared with two ` +
      `editors, each user with a device on every node), every device broadcasting in turn, ${teamRate} messages/s in all`,
    shared,
  );
}
const away = Math.max(...results.map((r) => r.late.awaySeconds)).toFixed(0);
console.log(
  `\nA device drops without a word; ${replayCount} messages follow in its room; it comes back on ` +
    `another node. Late: ${lateCount} more messages passed in the other rooms meanwhile ` +
    `(away up to ${away} s; window ${windowSeconds} s in both systems).`,
);
console.log('| system | replayed after a reconnect | replayed after a late reconnect |');
console.log('| --- | --- | --- |');
for (const r of results) {
  console.log(`| ${r.name} | ${describe(r.replay)} | ${describe(r.late)} |`);
}
process.exit(0);
