/** Memory per idle joined connection of each server, on a fresh process per server and round. */
import { connect, release } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import { type LoadChild, type Processes, type ServerChild, sleep } from '../processes.ts';
import { type ServerKind, type ServerReport, serverNames } from '../protocol.ts';
import { record } from '../stats.ts';

/** Connections opened before the memory baseline, so one-time costs (JIT, pools) are not counted. */
export const memoryBase = 1_000;

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

/** Joined connections at which the whole settled RSS is recorded too (not only the slope). */
export const memoryAbsoluteAt = 5_000;

/**
 * Memory per idle joined connection on a fresh process: the slope of settled RSS from
 * `memoryBase` to `memoryBase + idle` connections, so that what a process sets up once
 * (compiled code, buffer pools, the first heap pages) is not spread over the connections; and on
 * the way, the whole settled RSS at `memoryAbsoluteAt` connections (what a host with that many
 * devices takes, its base included).
 */
async function memoryPoint(procs: Processes, kind: ServerKind, load: LoadChild, idle: number) {
  const { server, url } = await procs.startServer(kind);
  await connect(load, kind, url, memoryBase);
  const before = await settledMemory(server);
  let added = await connect(load, kind, url, memoryAbsoluteAt - memoryBase);
  const at = await settledMemory(server);
  record(`${kind}.rssAtMiB`, at.rss / 1048576);
  if (idle > added.connections) {
    const more = await connect(load, kind, url, idle - added.connections);
    added = { ...more, connections: added.connections + more.connections };
  }
  const after = await settledMemory(server);
  record(`${kind}.rssKiB`, (after.rss - before.rss) / added.connections / 1024);
  record(`${kind}.heapKiB`, (after.heapUsed - before.heapUsed) / added.connections / 1024);
  await release(load);
  await procs.stopServer(server);
}

export async function runMemory(options: BenchOptions, procs: Processes): Promise<void> {
  const { plan } = options;
  for (let round = 1; round <= plan.rounds; round++) {
    for (const kind of options.kinds) {
      process.stderr.write(`memory ${round}/${plan.rounds}: ${serverNames[kind]}\n`);
      await memoryPoint(procs, kind, procs.load(kind), plan.idle);
    }
  }
}
