/**
 * The relay against the references (bare ws, Socket.IO): CPU per delivered message, broadcast
 * and direct, and latency at a fixed offered rate, interleaved window by window; the table
 * also shows the memory section's rows.
 */
import { mergeInto, percentileOf, sampleCount } from '../histogram.ts';
import { measureThroughput, startAll, stopAll } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import type { Processes } from '../processes.ts';
import { type LoadCommand, serverNames } from '../protocol.ts';
import { has, latencyOf, medianWithSpread, pooledLatency, print, ratio, record } from '../stats.ts';
import { memoryAbsoluteAt, memoryBase } from './memory.ts';

/**
 * One round: every server in a fresh process, all up at once (idle but the one measured), each
 * with 100 joined devices of its own generator; then short windows interleaved server by server
 * (relay, ws, Socket.IO, relay, ...), so that a change in the machine's load hits all of them
 * alike. The first window of each server and mode only warms up (JIT, batch sizes) and is not
 * recorded.
 */
async function compareRound(options: BenchOptions, procs: Processes, round: number) {
  const { plan } = options;
  const up = await startAll(procs, options.kinds, 100);
  for (const mode of ['broadcast', 'direct'] as const) {
    for (let window = 0; window <= plan.windows; window++) {
      process.stderr.write(
        `round ${round}/${plan.rounds}: ${mode} window ${window}/${plan.windows}\n`,
      );
      for (const { kind, server } of up) {
        const result = await measureThroughput(procs, plan, server, procs.load(kind), {
          mode,
          window: 64,
        });
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
      const latency = await procs.load(kind).ask(
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
  await stopAll(procs, up);
}

export async function runCompare(options: BenchOptions, procs: Processes): Promise<void> {
  for (let round = 1; round <= options.plan.rounds; round++) {
    await compareRound(options, procs, round);
  }
}

/** The table of the compare and memory sections, and their ratios. */
export function reportCompare(options: BenchOptions): void {
  const { kinds, plan } = options;
  print();
  for (const [kind, histogram] of pooledLatency) {
    record(`${kind}.pooledP50`, percentileOf(histogram, 0.5));
    record(`${kind}.pooledP99`, percentileOf(histogram, 0.99));
    record(`${kind}.latencySamples`, sampleCount(histogram));
  }
  print(`| measure | ${kinds.map((kind) => serverNames[kind]).join(' | ')} |`);
  print(`|---|${kinds.map(() => '---|').join('')}`);
  const row = (label: string, key: string, digits: number) =>
    kinds.some((kind) => has(`${kind}.${key}`)) &&
    print(
      `| ${label} | ${kinds.map((kind) => medianWithSpread(`${kind}.${key}`, digits)).join(' | ')} |`,
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
  row(
    `RSS with ${memoryAbsoluteAt.toLocaleString('en')} idle joined connections, MiB (the whole process)`,
    'rssAtMiB',
    1,
  );
  print(
    `Medians, with (min–max): CPU and latency over ${plan.windows} windows × ${plan.rounds} rounds, memory over ${plan.rounds} rounds.`,
  );
  const noTarget = Number.POSITIVE_INFINITY;
  ratio('broadcast CPU/msg, relay ÷ bare ws', 'relay.broadcast.us', 'ws.broadcast.us', 1.15);
  ratio('direct CPU/msg, relay ÷ bare ws', 'relay.direct.us', 'ws.direct.us', 1.15);
  ratio('direct CPU/msg, relay ÷ Socket.IO', 'relay.direct.us', 'sio.direct.us', 0.8);
  ratio(
    'broadcast CPU/msg, relay ÷ Socket.IO (no target)',
    'relay.broadcast.us',
    'sio.broadcast.us',
    noTarget,
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
    noTarget,
  );
  ratio('RSS per idle joined connection, relay ÷ bare ws', 'relay.rssKiB', 'ws.rssKiB', 1.3);
  ratio(
    `RSS with ${memoryAbsoluteAt.toLocaleString('en')} idle joined connections, relay ÷ bare ws`,
    'relay.rssAtMiB',
    'ws.rssAtMiB',
    1.1,
  );
  ratio(
    'JS heap per idle joined connection, relay ÷ bare ws (no target)',
    'relay.heapKiB',
    'ws.heapKiB',
    noTarget,
  );
}
