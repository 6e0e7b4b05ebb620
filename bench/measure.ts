/**
 * The measurements the sections share. Server CPU is utime+stime from /proc/self/stat, read
 * inside the server in the same synchronous step as its delivered counter, over the measured
 * window, divided by the messages the server counted as delivered in that window.
 */
import type { Plan } from './options.ts';
import {
  counters,
  dialectOf,
  type LoadChild,
  type Processes,
  type ServerChild,
  sleep,
} from './processes.ts';
import type { LoadCommand, ServerKind } from './protocol.ts';

/** `BENCH_CPU_PROF=relay` (or ws, sio): CPU profiles of that server's throughput windows. */
const profiled = process.env.BENCH_CPU_PROF;
let profileCount = 0;

export interface ThroughputWindow {
  mode: 'broadcast' | 'direct';
  /** Messages each device keeps in flight. */
  window: number;
  warmupMs?: number;
  /** Size of each routed message's payload (default: the ~80-byte edit). */
  payloadBytes?: number;
}

/** Closed-loop throughput: server CPU per delivered message over the measured window. */
export async function measureThroughput(
  procs: Processes,
  plan: Plan,
  server: ServerChild,
  load: LoadChild,
  { mode, window, warmupMs = plan.warmupMs, payloadBytes }: ThroughputWindow,
): Promise<{ usPerMessage: number; perSecond: number }> {
  load.send({ kind: 'throughput', mode, window, warmupMs, payloadBytes } satisfies LoadCommand);
  await load.next('measuring');
  const kind = procs.kindOf(server);
  if (profiled === kind) await server.ask({ kind: 'profile-start' }, 'profiling');
  const c0 = await counters(server);
  const t0 = performance.now();
  await sleep(plan.measureMs);
  const c1 = await counters(server);
  if (profiled === kind) {
    const name = `${profiled}-${mode}-${window}-${payloadBytes ?? 'edit'}-${++profileCount}`;
    await server.ask({ kind: 'profile-stop', name }, 'profiled');
  }
  const seconds = (performance.now() - t0) / 1000;
  load.send({ kind: 'stop' } satisfies LoadCommand);
  await load.next('stopped');
  const delivered = c1.delivered - c0.delivered;
  const cpu = c1.cpuSeconds - c0.cpuSeconds;
  return { usPerMessage: (cpu / delivered) * 1e6, perSecond: delivered / seconds };
}

/** Opens and joins `connections` devices (rooms of 4) on the server at `url`. */
export function connect(load: LoadChild, kind: ServerKind, url: string, connections: number) {
  return load.ask(
    { kind: 'connect', dialect: dialectOf(kind), url, connections } satisfies LoadCommand,
    'connected',
  );
}

/** A server under measurement and its kind. */
export interface Running {
  kind: ServerKind;
  server: ServerChild;
}

/**
 * A fresh process of every kind, all up at once, each with `connections` joined devices of its
 * own generator; `stopAll` releases the devices and stops them.
 */
export async function startAll(
  procs: Processes,
  kinds: ServerKind[],
  connections: number,
): Promise<Running[]> {
  const up: Running[] = [];
  for (const kind of kinds) {
    const { server, url } = await procs.startServer(kind);
    await connect(procs.load(kind), kind, url, connections);
    up.push({ kind, server });
  }
  return up;
}

export async function stopAll(procs: Processes, up: Running[]): Promise<void> {
  for (const { kind, server } of up) {
    await release(procs.load(kind));
    await procs.stopServer(server);
  }
}

/** Closes every device of the generator. */
export async function release(load: LoadChild): Promise<void> {
  await load.ask({ kind: 'release' } satisfies LoadCommand, 'released');
}
