/**
 * `npm run bench` (full, a few minutes) and `npm run bench:quick`: the relay against the bare-ws
 * forwarder and Socket.IO, interleaved per round (relay, ws, Socket.IO, relay, ws, ...), each
 * server in a fresh process of its own per round and the load generator in another. Prints
 * medians, spreads (min–max over rounds) and the ratios of issue 6; then the durable buffer,
 * the auth API against a bare express route (autocannon) on SQLite and PostgreSQL, and the
 * scale curve (100 to 10,000 connections). A full run writes docs/performance-scale.svg and
 * docs/performance-run.md. Server CPU is utime+stime from /proc/self/stat, read inside the server
 * in the same synchronous step as its delivered counter, over the measured window, divided by the
 * messages the server counted as delivered in that window.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import type { AuthServerReport } from './auth-server.ts';
import { type Histogram, mergeInto, percentileOf, sampleCount } from './histogram.ts';
import { renderSvg } from './plot.ts';
import {
  type Counters,
  type Dialect,
  type LoadCommand,
  type LoadReport,
  type ServerKind,
  type ServerReport,
  serverNames,
} from './protocol.ts';

const quick = process.argv.includes('--quick');
const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7);
const section = (name: string) => only === undefined || only.split(',').includes(name);
const plan = quick
  ? {
      rounds: 2,
      windows: 4,
      warmupMs: 300,
      measureMs: 1_000,
      latencyMs: 1_500,
      idle: 5_000,
      scale: [100, 1_000, 10_000],
      authSeconds: 2,
      authRounds: 2,
    }
  : {
      rounds: 3,
      windows: 6,
      warmupMs: 300,
      measureMs: 1_500,
      latencyMs: 2_000,
      idle: 8_000,
      scale: [100, 1_000, 3_000, 10_000],
      authSeconds: 2,
      authRounds: 8,
    };
const kindsArg = process.argv.find((a) => a.startsWith('--kinds='))?.slice(8);
/** `--kinds=relay,ws` compares a subset (faster A/B runs); the ratios to a missing kind are left out. */
const kinds = (kindsArg?.split(',') ?? ['relay', 'ws', 'sio']) as ServerKind[];
const roundsArg = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9));
/** `--rounds=N` overrides the number of interleaved rounds. */
if (Number.isInteger(roundsArg) && roundsArg > 0) plan.rounds = roundsArg;
const windowsArg = Number(process.argv.find((a) => a.startsWith('--windows='))?.slice(10));
/** `--windows=N` overrides the measured windows per server and mode in a round. */
if (Number.isInteger(windowsArg) && windowsArg > 0) plan.windows = windowsArg;
const scaleArg = process.argv.find((a) => a.startsWith('--scale='))?.slice(8);
/** `--scale=100,10000` overrides the connection counts of the scale curve. */
if (scaleArg !== undefined) plan.scale = scaleArg.split(',').map(Number);
const here = import.meta.dirname;
/**
 * Servers on processor 0, load generators on processor 1 (taskset), so that neither steals the
 * other's core and the closed loop's batching does not change with the scheduler's mood.
 * `--no-pin` lets the kernel place them (as the first bench versions did).
 */
const pin = !process.argv.includes('--no-pin') && availableParallelism() >= 2;
const serverCpu = pin ? 0 : undefined;
const loadCpu = pin ? 1 : undefined;
const tsx = ['--import', 'tsx'];

/** A forked process with an inbox, so no report is missed between two awaits. */
class Child<Report extends { kind: string }> {
  readonly proc: ChildProcess;
  readonly #inbox: Report[] = [];
  #waiters: Array<() => void> = [];
  #exited: Error | undefined;

  /** `cpu`: the processor the child is pinned to (taskset), when pinning is on. */
  constructor(file: string, args: string[], execArgv: string[], cpu?: number) {
    const node = [...tsx, ...execArgv, join(here, file), ...args];
    const stdio = ['inherit', 'inherit', 'inherit', 'ipc'] as const;
    this.proc =
      cpu === undefined
        ? spawn(process.execPath, node, { stdio: [...stdio] })
        : spawn('taskset', ['-c', String(cpu), process.execPath, ...node], { stdio: [...stdio] });
    this.proc.on('message', (report: Report) => {
      this.#inbox.push(report);
      this.#wake();
    });
    this.proc.on('exit', (code) => {
      this.#exited = new Error(`${file} ${args.join(' ')} exited with ${code}`);
      this.#wake();
    });
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  send(message: object): void {
    this.proc.send(message);
  }

  async next<K extends Report['kind']>(kind: K): Promise<Extract<Report, { kind: K }>> {
    for (;;) {
      const at = this.#inbox.findIndex((r) => r.kind === kind);
      if (at >= 0) return this.#inbox.splice(at, 1)[0] as Extract<Report, { kind: K }>;
      if (this.#exited !== undefined) throw this.#exited;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
      });
    }
  }

  async ask<K extends Report['kind']>(
    message: object,
    kind: K,
  ): Promise<Extract<Report, { kind: K }>> {
    this.send(message);
    return this.next(kind);
  }
}

type ServerChild = Child<ServerReport>;
type LoadChild = Child<LoadReport>;
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `BENCH_CPU_PROF=relay` (or ws, sio): CPU profiles of that server's throughput windows. */
const profiled = process.env.BENCH_CPU_PROF;
let profileCount = 0;
const kindOf = new WeakMap<ServerChild, ServerKind>();

async function startServer(
  kind: ServerKind,
): Promise<{ server: ServerChild; url: string; dbPath: string | undefined }> {
  const server = new Child<ServerReport>(
    'server.ts',
    [kind],
    ['--expose-gc', ...(process.env.BENCH_NODE_FLAGS?.split(' ') ?? [])],
    serverCpu,
  );
  children.push(server.proc);
  kindOf.set(server, kind);
  const { port, dbPath } = await server.next('ready');
  const url = kind === 'sio' ? `http://127.0.0.1:${port}` : `ws://127.0.0.1:${port}/`;
  return { server, url, dbPath };
}

async function stopServer(server: ServerChild): Promise<void> {
  const exited = new Promise((resolve) => server.proc.once('exit', resolve));
  server.send({ kind: 'close' });
  await Promise.race([exited, sleep(5_000)]);
  if (server.proc.exitCode === null) server.proc.kill('SIGKILL');
}

function startLoad(): LoadChild {
  const load = new Child<LoadReport>('load.ts', [], [], loadCpu);
  children.push(load.proc);
  return load;
}

async function counters(server: ServerChild): Promise<Counters> {
  return server.ask({ kind: 'counters' }, 'counters');
}

const dialectOf = (kind: ServerKind): Dialect => (kind === 'sio' ? 'sio' : 'frames');

// ---------- statistics ----------

const samples = new Map<string, number[]>();
function record(key: string, value: number): void {
  if (process.env.BENCH_VERBOSE) process.stderr.write(`  ${key} = ${value.toFixed(2)}\n`);
  let list = samples.get(key);
  if (list === undefined) {
    list = [];
    samples.set(key, list);
  }
  list.push(value);
}
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? Number.NaN)
    : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
}
const med = (key: string) => median(samples.get(key) ?? []);
function spread(key: string, digits: number): string {
  const list = samples.get(key) ?? [];
  if (list.length < 2) return '';
  return `${Math.min(...list).toFixed(digits)}–${Math.max(...list).toFixed(digits)}`;
}

/** Every latency sample of the compared servers, pooled over all windows and rounds. */
const pooledLatency = new Map<string, Histogram>();
function latencyOf(kind: ServerKind): Histogram {
  let histogram = pooledLatency.get(kind);
  if (histogram === undefined) {
    histogram = {};
    pooledLatency.set(kind, histogram);
  }
  return histogram;
}

const lines: string[] = [];
function print(line = ''): void {
  lines.push(line);
  process.stdout.write(`${line}\n`);
}

// ---------- relay against the references ----------

/** Closed-loop throughput: server CPU per delivered message over the measured window. */
async function measureThroughput(
  server: ServerChild,
  load: LoadChild,
  mode: 'broadcast' | 'direct',
  window: number,
  warmupMs = plan.warmupMs,
): Promise<{ usPerMessage: number; perSecond: number }> {
  load.send({ kind: 'throughput', mode, window, warmupMs } satisfies LoadCommand);
  await load.next('measuring');
  if (profiled === kindOf.get(server)) await server.ask({ kind: 'profile-start' }, 'profiling');
  const c0 = await counters(server);
  const t0 = performance.now();
  await sleep(plan.measureMs);
  const c1 = await counters(server);
  if (profiled === kindOf.get(server)) {
    const name = `${profiled}-${mode}-${window}-${++profileCount}`;
    await server.ask({ kind: 'profile-stop', name }, 'profiled');
  }
  const seconds = (performance.now() - t0) / 1000;
  load.send({ kind: 'stop' } satisfies LoadCommand);
  await load.next('stopped');
  const delivered = c1.delivered - c0.delivered;
  const cpu = c1.cpuSeconds - c0.cpuSeconds;
  return { usPerMessage: (cpu / delivered) * 1e6, perSecond: delivered / seconds };
}

async function connect(load: LoadChild, kind: ServerKind, url: string, connections: number) {
  return load.ask(
    { kind: 'connect', dialect: dialectOf(kind), url, connections } satisfies LoadCommand,
    'connected',
  );
}

async function release(load: LoadChild): Promise<void> {
  await load.ask({ kind: 'release' } satisfies LoadCommand, 'released');
}

/** Connections opened before the memory baseline, so one-time costs (JIT, pools) are not counted. */
const memoryBase = 1_000;

type Memory = Extract<ServerReport, { kind: 'memory' }>;

/**
 * The memory of an idle server: after full GCs, once V8's memory reducer has given back the
 * young generation that a burst of joins grew (it does so after a few idle seconds; until then
 * RSS holds up to 32 MB of empty semi-space, more the more a join allocates) and RSS stopped
 * moving. At most 20 s.
 */
async function settledMemory(server: ServerChild): Promise<Memory> {
  let last = await server.ask({ kind: 'memory' }, 'memory');
  let stillFor = 0;
  const until = performance.now() + 20_000;
  while (performance.now() < until) {
    await sleep(1_000);
    const now = await server.ask({ kind: 'memory' }, 'memory');
    stillFor = Math.abs(now.rss - last.rss) < 0.005 * last.rss ? stillFor + 1 : 0;
    if (process.env.BENCH_VERBOSE) {
      process.stderr.write(
        `  memory: rss ${(now.rss / 1048576).toFixed(1)} MB, new space ${(now.newSpace / 1048576).toFixed(1)} MB\n`,
      );
    }
    last = now;
    if (stillFor >= 2 && now.newSpace <= 2 * 1024 * 1024) break;
  }
  return last;
}

/**
 * Memory per idle joined connection on a fresh process: the slope of settled RSS from
 * `memoryBase` to `memoryBase + plan.idle` connections, so that what a process sets up once
 * (compiled code, buffer pools, the first heap pages) is not spread over the connections.
 */
async function memoryPoint(kind: ServerKind, load: LoadChild): Promise<void> {
  const { server, url } = await startServer(kind);
  await connect(load, kind, url, memoryBase);
  const before = await settledMemory(server);
  const idle = await connect(load, kind, url, plan.idle);
  const after = await settledMemory(server);
  record(`${kind}.rssKiB`, (after.rss - before.rss) / idle.connections / 1024);
  record(`${kind}.heapKiB`, (after.heapUsed - before.heapUsed) / idle.connections / 1024);
  await release(load);
  await stopServer(server);
}

/**
 * One round: every server in a fresh process, all up at once (idle but the one measured), each
 * with 100 joined devices of its own generator; then short windows interleaved server by server
 * (relay, ws, Socket.IO, relay, ...), so that a change in the machine's load hits all of them
 * alike. The first window of each server and mode only warms up (JIT, batch sizes) and is not
 * recorded.
 */
async function compareRound(round: number): Promise<void> {
  const up: Array<{ kind: ServerKind; server: ServerChild }> = [];
  for (const kind of kinds) {
    const { server, url } = await startServer(kind);
    await connect(load(kind), kind, url, 100);
    up.push({ kind, server });
  }
  for (const mode of ['broadcast', 'direct'] as const) {
    for (let window = 0; window <= plan.windows; window++) {
      process.stderr.write(
        `round ${round}/${plan.rounds}: ${mode} window ${window}/${plan.windows}\n`,
      );
      for (const { kind, server } of up) {
        const result = await measureThroughput(server, load(kind), mode, 64);
        if (window === 0) continue;
        record(`${kind}.${mode}.us`, result.usPerMessage);
        record(`${kind}.${mode}.rate`, result.perSecond);
      }
    }
  }
  for (let window = 0; window <= plan.windows; window++) {
    process.stderr.write(
      `round ${round}/${plan.rounds}: latency window ${window}/${plan.windows}\n`,
    );
    for (const { kind } of up) {
      const latency = await load(kind).ask(
        {
          kind: 'latency',
          ratePerSecond: 5_000,
          warmupMs: plan.warmupMs,
          measureMs: plan.latencyMs,
        } satisfies LoadCommand,
        'latency',
      );
      if (window === 0) continue;
      record(`${kind}.p50`, latency.p50Ms);
      record(`${kind}.p99`, latency.p99Ms);
      mergeInto(latencyOf(kind), latency.histogram);
    }
  }
  for (const { kind, server } of up) {
    await release(load(kind));
    await stopServer(server);
  }
}

/**
 * Durable buffer: committed messages per second into SQLite for absent devices, counted in the
 * relay's database file itself (a second reader; WAL), from the first send to the last commit.
 */
async function bufferRound(load: LoadChild): Promise<void> {
  const { server, url, dbPath } = await startServer('relay');
  await connect(load, 'relay', url, 100);
  const absentPerRoom = 3;
  const perSender = quick ? 1_000 : 3_000;
  load.send({ kind: 'buffer', absentPerRoom, perSender } satisfies LoadCommand);
  await load.next('measuring');
  const t0 = performance.now();
  const db = new Database(dbPath as string, { readonly: true, fileMustExist: true });
  const count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM bufferedMessages');
  const expected = 25 * perSender * absentPerRoom;
  let committed = 0;
  const deadline = t0 + 60_000;
  while (committed < expected && performance.now() < deadline) {
    await sleep(20);
    committed = count.get()?.n ?? 0;
  }
  const seconds = (performance.now() - t0) / 1000;
  db.close();
  await load.next('sent');
  if (committed < expected)
    throw new Error(`buffer: ${committed} of ${expected} committed in 60 s`);
  record('buffer.rate', committed / seconds);
  await release(load);
  await stopServer(server);
}

// ---------- scale ----------

const scaleRows: Array<{
  kind: ServerKind;
  connections: number;
  us: number;
  p99: number;
  rssKiB: number;
  connectSeconds: number;
}> = [];

/** Messages each device keeps in flight in the scale curve. */
const scaleWindow = 16;
/** Throughput windows per point of the curve (their median is the point). */
const scaleWindows = quick ? 1 : 3;

async function scalePoint(kind: ServerKind, load: LoadChild, connections: number): Promise<void> {
  const { server, url } = await startServer(kind);
  const before = await server.ask({ kind: 'memory' }, 'memory');
  const opened = await connect(load, kind, url, connections);
  const after = await server.ask({ kind: 'memory' }, 'memory');
  // the same window per device at every size, so each device's batching is the same and the
  // total in flight grows with the connections (1,600 at 100, 160,000 at 10,000)
  // a fresh process measured once: a longer warm-up than the interleaved windows
  const windows: number[] = [];
  for (let w = 0; w < scaleWindows; w++) {
    const result = await measureThroughput(server, load, 'broadcast', scaleWindow, 1_000);
    windows.push(result.usPerMessage);
  }
  const throughput = { usPerMessage: median(windows) };
  const latency = await load.ask(
    {
      kind: 'latency',
      ratePerSecond: 2_000,
      warmupMs: 1_000,
      measureMs: plan.latencyMs,
    } satisfies LoadCommand,
    'latency',
  );
  scaleRows.push({
    kind,
    connections: opened.connections,
    us: throughput.usPerMessage,
    p99: latency.p99Ms,
    rssKiB: (after.rss - before.rss) / opened.connections / 1024,
    connectSeconds: opened.seconds,
  });
  await release(load);
  await stopServer(server);
}

// ---------- auth API ----------

/**
 * The HTTP load tool: wrk (C, one thread, on the generators' processor) when installed, so the
 * server and not the client is the limit; else autocannon, in this process.
 */
const wrk = spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
const httpTool = wrk ? 'wrk' : 'autocannon';

async function cannonWrk(url: string, token: string | undefined, seconds: number): Promise<number> {
  const args = ['-t1', '-c16', `-d${seconds}s`, '--latency'];
  if (token !== undefined) args.push('-H', `Authorization: Bearer ${token}`);
  const command = loadCpu === undefined ? ['wrk'] : ['taskset', '-c', String(loadCpu), 'wrk'];
  const child = spawn(command[0] as string, [...command.slice(1), ...args, url]);
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  await new Promise((resolve) => child.once('exit', resolve));
  const failures = /Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)/.exec(out);
  if (failures !== null) throw new Error(`${url}: ${failures[0]}`);
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  if (!Number.isFinite(rate)) throw new Error(`${url}: wrk printed no rate:\n${out}`);
  return rate;
}

async function cannon(url: string, token: string | undefined, seconds: number): Promise<number> {
  if (wrk) return cannonWrk(url, token, seconds);
  const result = await autocannon({
    url,
    connections: 16,
    duration: seconds,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  return result.requests.average;
}

async function authBench(driver: 'sqlite' | 'postgres'): Promise<string | undefined> {
  const child = new Child<AuthServerReport>(
    'auth-server.ts',
    [driver],
    process.env.BENCH_AUTH_FLAGS?.split(' ') ?? [],
    serverCpu,
  );
  children.push(child.proc);
  const first = await Promise.race([child.next('ready'), child.next('skipped')]);
  if (first.kind === 'skipped') return first.reason;
  const ready = first;
  // warm both up (JIT, connection pool)
  await cannon(`${ready.bareUrl}/constant`, undefined, 1);
  await cannon(`${ready.authUrl}/auth/device`, ready.token, 1);
  for (let round = 0; round < plan.authRounds; round++) {
    record(
      `auth.${driver}.bare`,
      await cannon(`${ready.bareUrl}/constant`, undefined, plan.authSeconds),
    );
    record(
      `auth.${driver}.device`,
      await cannon(`${ready.authUrl}/auth/device`, ready.token, plan.authSeconds),
    );
    record(
      `auth.${driver}.devices`,
      await cannon(`${ready.authUrl}/auth/devices`, ready.token, plan.authSeconds),
    );
  }
  const exited = new Promise((resolve) => child.proc.once('exit', resolve));
  child.send({ kind: 'stop' });
  await Promise.race([exited, sleep(5_000)]);
  return undefined;
}

// ---------- run ----------

const started = performance.now();
const loads = new Map<ServerKind, LoadChild>();
/** One generator process per server kind, started on first use. */
function load(kind: ServerKind): LoadChild {
  let child = loads.get(kind);
  if (child === undefined) {
    child = startLoad();
    loads.set(kind, child);
  }
  return child;
}

if (section('compare')) {
  for (let round = 1; round <= plan.rounds; round++) await compareRound(round);
}
if (section('memory')) {
  for (let round = 1; round <= plan.rounds; round++) {
    for (const kind of kinds) {
      process.stderr.write(`memory ${round}/${plan.rounds}: ${serverNames[kind]}\n`);
      await memoryPoint(kind, load(kind));
    }
  }
}
if (section('buffer')) {
  for (let round = 1; round <= plan.rounds; round++) {
    process.stderr.write(`durable buffer ${round}/${plan.rounds}\n`);
    await bufferRound(load('relay'));
  }
}
const authSkipped: string[] = [];
if (section('auth')) {
  // autocannon runs in this process: on the generators' processor, the servers keep theirs
  if (loadCpu !== undefined) {
    spawnSync('taskset', ['-a', '-p', '-c', String(loadCpu), String(process.pid)], {
      stdio: 'ignore',
    });
  }
  for (const driver of ['sqlite', 'postgres'] as const) {
    process.stderr.write(`auth API on ${driver}\n`);
    const skipped = await authBench(driver);
    if (skipped !== undefined) authSkipped.push(`${driver}: skipped (${skipped})`);
  }
}
if (section('scale')) {
  for (const connections of plan.scale) {
    for (const kind of kinds.filter((k) => k !== 'sio')) {
      process.stderr.write(`scale: ${serverNames[kind]} with ${connections} connections\n`);
      await scalePoint(kind, load(kind), connections);
    }
  }
}
for (const child of loads.values()) child.proc.kill();

// ---------- report ----------

const verdicts: Array<{
  name: string;
  value: number;
  limit: number;
  atMost: boolean;
  unit: string;
}> = [];
function ratio(name: string, a: string, b: string, limit: number, atMost = true): void {
  if (!samples.has(a) || !samples.has(b)) return;
  verdicts.push({ name, value: med(a) / med(b), limit, atMost, unit: '×' });
}

print(
  `# sync-host bench (${quick ? 'quick' : 'full'}): node ${process.version}, ${plan.rounds} rounds interleaved relay/ws/Socket.IO, loopback`,
);
if (section('compare') || section('memory')) {
  print();
  for (const [kind, histogram] of pooledLatency) {
    record(`${kind}.pooledP50`, percentileOf(histogram, 0.5));
    record(`${kind}.pooledP99`, percentileOf(histogram, 0.99));
    record(`${kind}.latencySamples`, sampleCount(histogram));
  }
  print(`| measure | ${kinds.map((kind) => serverNames[kind]).join(' | ')} |`);
  print(`|---|${kinds.map(() => '---|').join('')}`);
  const row = (label: string, key: string, digits: number) =>
    kinds.some((kind) => samples.has(`${kind}.${key}`)) &&
    print(
      `| ${label} | ${kinds
        .map((kind) => {
          const k = `${kind}.${key}`;
          const s = spread(k, digits);
          return `${med(k).toFixed(digits)}${s === '' ? '' : ` (${s})`}`;
        })
        .join(' | ')} |`,
    );
  row('broadcast, rooms of 4: server CPU µs per delivered message', 'broadcast.us', 2);
  row('broadcast: delivered msg/s', 'broadcast.rate', 0);
  row('direct: server CPU µs per delivered message', 'direct.us', 2);
  row('direct: delivered msg/s', 'direct.rate', 0);
  row('latency at 5,000 msg/s (broadcast, 15,000 deliveries/s): p50 ms, per window', 'p50', 2);
  row('latency at 5,000 msg/s: p99 ms, per window', 'p99', 2);
  row('latency at 5,000 msg/s: p50 ms, all windows pooled', 'pooledP50', 2);
  row('latency at 5,000 msg/s: p99 ms, all windows pooled', 'pooledP99', 2);
  row('latency samples pooled', 'latencySamples', 0);
  row(
    `RSS per idle joined connection, KiB (slope from ${memoryBase} to ${(memoryBase + plan.idle).toLocaleString('en')} connections)`,
    'rssKiB',
    1,
  );
  row('JS heap per idle joined connection, KiB', 'heapKiB', 1);
  print(
    `Medians, with (min–max): CPU and latency over ${plan.windows} windows × ${plan.rounds} rounds, memory over ${plan.rounds} rounds.`,
  );
  ratio('broadcast CPU/msg, relay ÷ bare ws', 'relay.broadcast.us', 'ws.broadcast.us', 1.15);
  ratio('direct CPU/msg, relay ÷ bare ws', 'relay.direct.us', 'ws.direct.us', 1.15);
  ratio('direct CPU/msg, relay ÷ Socket.IO', 'relay.direct.us', 'sio.direct.us', 0.8);
  ratio(
    'broadcast CPU/msg, relay ÷ Socket.IO (no target)',
    'relay.broadcast.us',
    'sio.broadcast.us',
    Number.POSITIVE_INFINITY,
  );
  ratio(
    'p99 latency at 5,000 msg/s (pooled), relay ÷ bare ws',
    'relay.pooledP99',
    'ws.pooledP99',
    1.5,
  );
  ratio(
    'p99 latency at 5,000 msg/s (median of windows), relay ÷ bare ws (no target)',
    'relay.p99',
    'ws.p99',
    Number.POSITIVE_INFINITY,
  );
  ratio('RSS per idle joined connection, relay ÷ bare ws', 'relay.rssKiB', 'ws.rssKiB', 1.3);
  ratio(
    'JS heap per idle joined connection, relay ÷ bare ws (no target)',
    'relay.heapKiB',
    'ws.heapKiB',
    Number.POSITIVE_INFINITY,
  );
}
if (section('buffer')) {
  print();
  print(
    `durable buffer: ${Math.round(med('buffer.rate')).toLocaleString('en')} messages/s committed to SQLite for absent devices (${spread('buffer.rate', 0)}; 25 rooms, 3 absent devices each, one live sender each, from the first send to the last commit)`,
  );
  verdicts.push({
    name: 'durable buffer, messages/s',
    value: med('buffer.rate'),
    limit: 50_000,
    atMost: false,
    unit: '',
  });
}
if (section('auth')) {
  print();
  print(
    `| auth API, requests/s (${httpTool}, 16 connections) | bare express | GET /auth/device | GET /auth/devices |`,
  );
  print('|---|---|---|---|');
  for (const driver of ['sqlite', 'postgres'] as const) {
    if (!samples.has(`auth.${driver}.bare`)) continue;
    print(
      `| ${driver} | ${['bare', 'device', 'devices']
        .map(
          (k) => `${Math.round(med(`auth.${driver}.${k}`))} (${spread(`auth.${driver}.${k}`, 0)})`,
        )
        .join(' | ')} |`,
    );
    ratio(
      `auth ${driver}: /auth/device ÷ bare express`,
      `auth.${driver}.device`,
      `auth.${driver}.bare`,
      0.8,
      false,
    );
    ratio(
      `auth ${driver}: /auth/devices ÷ bare express`,
      `auth.${driver}.devices`,
      `auth.${driver}.bare`,
      0.8,
      false,
    );
  }
  for (const line of authSkipped) print(line);
}
if (section('scale') && scaleRows.length > 0) {
  print();
  print(
    '| connections | server | connect+join s | CPU µs per delivered broadcast | p99 ms at 2,000 broadcasts/s | RSS KiB per connection |',
  );
  print('|---|---|---|---|---|---|');
  for (const r of scaleRows) {
    print(
      `| ${r.connections.toLocaleString('en')} | ${serverNames[r.kind]} | ${r.connectSeconds.toFixed(1)} | ${r.us.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.rssKiB.toFixed(1)} |`,
    );
  }
  const relayRows = scaleRows.filter((r) => r.kind === 'relay');
  const first = relayRows[0];
  const last = relayRows[relayRows.length - 1];
  if (first !== undefined && last !== undefined && last !== first) {
    verdicts.push({
      name: `scale: relay joined connections held`,
      value: last.connections,
      limit: 10_000,
      atMost: false,
      unit: '',
    });
    verdicts.push({
      name: `scale: relay CPU/msg at ${last.connections.toLocaleString('en')} ÷ at ${first.connections} connections`,
      value: last.us / first.us,
      limit: 1.15,
      atMost: true,
      unit: '×',
    });
  }
  if (!quick) {
    const series = (
      kind: ServerKind,
      color: string,
      pick: (r: (typeof scaleRows)[number]) => number,
    ) => ({
      name: serverNames[kind],
      color,
      points: scaleRows
        .filter((r) => r.kind === kind)
        .map((r) => ({ x: r.connections, y: pick(r) })),
    });
    const svg = renderSvg(
      [
        {
          title: 'Server CPU per delivered broadcast',
          yLabel: 'µs per delivered message',
          series: [series('relay', '#c0392b', (r) => r.us), series('ws', '#2c7bb6', (r) => r.us)],
        },
        {
          title: 'p99 one-way latency, 2,000 broadcasts/s',
          yLabel: 'ms',
          series: [series('relay', '#c0392b', (r) => r.p99), series('ws', '#2c7bb6', (r) => r.p99)],
        },
      ],
      plan.scale,
      'npm run bench — rooms of 4, loopback, 2 shared vCPUs',
    );
    writeFileSync(join(here, '..', 'docs', 'performance-scale.svg'), svg);
  }
}
print();
print('| target | measured | limit | met |');
print('|---|---|---|---|');
for (const v of verdicts) {
  const met = v.atMost ? v.value <= v.limit : v.value >= v.limit;
  const digits = v.unit === '×' ? 2 : 0;
  const limit = Number.isFinite(v.limit)
    ? `${v.atMost ? '≤' : '≥'} ${v.limit.toLocaleString('en')}${v.unit}`
    : '—';
  print(
    `| ${v.name} | ${v.value.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits })}${v.unit} | ${limit} | ${Number.isFinite(v.limit) ? (met ? 'yes' : '**no**') : ''} |`,
  );
}
print();
print(`(${((performance.now() - started) / 1000).toFixed(0)} s)`);
if (!quick && only === undefined) {
  writeFileSync(join(here, '..', 'docs', 'performance-run.md'), `${lines.join('\n')}\n`);
}
process.exit(0);
