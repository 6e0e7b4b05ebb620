/**
 * The scale curve: a fresh process per point, 100 to 10,000 joined connections, CPU per
 * delivered broadcast, p99 at a fixed rate and RSS per connection; a full run plots it into
 * docs/performance-scale.svg.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, measureThroughput, release } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import { renderSvg } from '../plot.ts';
import type { LoadChild, Processes } from '../processes.ts';
import { type LoadCommand, type ServerKind, serverNames } from '../protocol.ts';
import { median, print, verdict } from '../stats.ts';

interface ScaleRow {
  kind: ServerKind;
  connections: number;
  us: number;
  p99: number;
  rssKiB: number;
  connectSeconds: number;
}

const rows: ScaleRow[] = [];

/** Messages each device keeps in flight in the scale curve. */
const scaleWindow = 16;

async function scalePoint(
  options: BenchOptions,
  procs: Processes,
  kind: ServerKind,
  load: LoadChild,
  connections: number,
): Promise<void> {
  const { plan } = options;
  /** Throughput windows per point of the curve (their median is the point). */
  const windows = options.quick ? 1 : 3;
  const { server, url } = await procs.startServer(kind);
  const before = await server.ask({ kind: 'memory' }, 'memory');
  const opened = await connect(load, kind, url, connections);
  const after = await server.ask({ kind: 'memory' }, 'memory');
  // the same window per device at every size, so each device's batching is the same and the
  // total in flight grows with the connections (1,600 at 100, 160,000 at 10,000)
  // a fresh process measured once: a longer warm-up than the interleaved windows
  const us: number[] = [];
  for (let w = 0; w < windows; w++) {
    const result = await measureThroughput(procs, plan, server, load, {
      mode: 'broadcast',
      window: scaleWindow,
      warmupMs: 1_000,
    });
    us.push(result.usPerMessage);
  }
  const latency = await load.ask(
    {
      kind: 'latency',
      ratePerSecond: 2_000,
      warmupMs: 1_000,
      measureMs: plan.latencyMs,
    } satisfies LoadCommand,
    'latency',
  );
  rows.push({
    kind,
    connections: opened.connections,
    us: median(us),
    p99: latency.p99Ms,
    rssKiB: (after.rss - before.rss) / opened.connections / 1024,
    connectSeconds: opened.seconds,
  });
  await release(load);
  await procs.stopServer(server);
}

export async function runScale(options: BenchOptions, procs: Processes): Promise<void> {
  for (const connections of options.plan.scale) {
    for (const kind of options.kinds.filter((k) => k !== 'sio')) {
      process.stderr.write(`scale: ${serverNames[kind]} with ${connections} connections\n`);
      await scalePoint(options, procs, kind, procs.load(kind), connections);
    }
  }
}

function plot(options: BenchOptions): void {
  const series = (kind: ServerKind, color: string, pick: (r: ScaleRow) => number) => ({
    name: serverNames[kind],
    color,
    points: rows.filter((r) => r.kind === kind).map((r) => ({ x: r.connections, y: pick(r) })),
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
    options.plan.scale,
    'npm run bench — rooms of 4, loopback, 2 shared vCPUs',
  );
  writeFileSync(join(import.meta.dirname, '..', '..', 'docs', 'performance-scale.svg'), svg);
}

export function reportScale(options: BenchOptions): void {
  if (rows.length === 0) return;
  print();
  print(
    '| connections | server | connect+join s | CPU µs per delivered broadcast | p99 ms at 2,000 broadcasts/s | RSS KiB per connection |',
  );
  print('|---|---|---|---|---|---|');
  for (const r of rows) {
    print(
      `| ${r.connections.toLocaleString('en')} | ${serverNames[r.kind]} | ${r.connectSeconds.toFixed(1)} | ${r.us.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.rssKiB.toFixed(1)} |`,
    );
  }
  const relayRows = rows.filter((r) => r.kind === 'relay');
  const first = relayRows[0];
  const last = relayRows[relayRows.length - 1];
  if (first !== undefined && last !== undefined && last !== first) {
    verdict({
      name: `scale: relay joined connections held`,
      value: last.connections,
      limit: 10_000,
      atMost: false,
      unit: '',
    });
    verdict({
      name: `scale: relay CPU/msg at ${last.connections.toLocaleString('en')} ÷ at ${first.connections} connections`,
      value: last.us / first.us,
      limit: 1.15,
      atMost: true,
      unit: '×',
    });
  }
  if (!options.quick) plot(options);
}
