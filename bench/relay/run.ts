/**
 * Relay benchmark (`npm run bench:relay`): the relay runs in this process, the load generator
 * in a forked one, both on loopback. Reports delivered messages per second (broadcast in rooms
 * of 4, direct), latency at a fixed offered rate, relay CPU per delivered message (from
 * /proc/<pid>/stat) and relay memory per idle joined connection. Bounded to well under 2 minutes.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createLogger } from '../../server/log.ts';
import { createRelay } from '../../server/relay/index.ts';
import type { LoadCommand, LoadReport } from './load.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const secret = 'bench-secret';
const dir = mkdtempSync(join(tmpdir(), 'relay-bench-'));
const relay = createRelay({
  config: {
    secret,
    sqlitePath: join(dir, 'relay.db'),
    wsPort: 0,
    statusPort: 0,
    bind: '127.0.0.1',
    tokenSignature: 'hmac-sha256',
    // the bench measures routing, not the per-connection limit
    ratePerSecond: 1_000_000,
    rateBurst: 1_000_000,
    roomMaxDevices: 64,
    messageMaxBytes: 1_048_576,
    bufferSeconds: 60,
    bufferMaxMessages: 10_000,
    bufferMaxBytes: 16 * 1024 * 1024,
    logLevel: 'silent',
    unknownKeys: [],
    explicit: new Set(),
  },
  secret,
  logger: createLogger('silent'),
});
const ports = await relay.listen();
const statusUrl = `http://127.0.0.1:${ports.statusPort}`;

const load = fork(join(import.meta.dirname, 'load.ts'), [], {
  execArgv: ['--import', 'tsx'],
  env: {
    ...process.env,
    BENCH_RELAY_URL: `ws://127.0.0.1:${ports.wsPort}/`,
    BENCH_RELAY_SECRET: secret,
  },
});

async function ask<K extends LoadReport['kind']>(
  command: LoadCommand | undefined,
  kind: K,
): Promise<Extract<LoadReport, { kind: K }>> {
  if (command !== undefined) load.send(command);
  for (;;) {
    const [report] = (await once(load, 'message')) as [LoadReport];
    if (report.kind === kind) return report as Extract<LoadReport, { kind: K }>;
  }
}

/** utime + stime of this process in seconds, from /proc/<pid>/stat (clock ticks of 1/100 s). */
function cpuSeconds(): number {
  const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function delivered(): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  return Number(/relay_messages_delivered_total (\d+)/.exec(text)?.[1] ?? Number.NaN);
}

const rooms = 25;
const results: string[] = [];

// memory first, while the heap holds nothing else
gc();
const before = process.memoryUsage();
const idle = await ask({ kind: 'idle', connections: 2_000 }, 'idle');
gc();
const after = process.memoryUsage();
const perConnection = (field: 'rss' | 'heapUsed' | 'external') =>
  ((after[field] - before[field]) / idle.connections / 1024).toFixed(1);
results.push(
  `memory per idle joined connection (${idle.connections}): ${perConnection('rss')} KiB RSS, ` +
    `${perConnection('heapUsed')} KiB JS heap, ${perConnection('external')} KiB external`,
);
await ask({ kind: 'release' }, 'released');

for (const mode of ['broadcast', 'direct'] as const) {
  load.send({
    kind: 'throughput',
    mode,
    rooms,
    warmupMs: 1_500,
    measureMs: 5_000,
    window: 64,
  } satisfies LoadCommand);
  await ask(undefined, 'measuring');
  const cpuBefore = cpuSeconds();
  const deliveredBefore = await delivered();
  const report = await ask(undefined, 'throughput');
  const cpu = cpuSeconds() - cpuBefore;
  const relayDelivered = (await delivered()) - deliveredBefore;
  const rate = report.received / report.seconds;
  results.push(
    `${mode.padEnd(9)} rooms of 4 x ${rooms}: ${Math.round(rate).toLocaleString('en')} delivered msg/s; ` +
      `relay CPU ${((cpu / relayDelivered) * 1e6).toFixed(2)} us per delivered message ` +
      `(${Math.round((cpu / report.seconds) * 100)}% of a core)`,
  );
}

for (const ratePerSecond of [1_000, 5_000]) {
  const report = await ask(
    { kind: 'latency', rooms, ratePerSecond, warmupMs: 1_000, measureMs: 5_000 },
    'latency',
  );
  results.push(
    `latency at ${ratePerSecond.toLocaleString('en')} broadcasts/s offered (${(ratePerSecond * 3).toLocaleString('en')} deliveries/s): ` +
      `p50 ${report.p50Ms.toFixed(2)} ms, p99 ${report.p99Ms.toFixed(2)} ms, max ${report.maxMs.toFixed(1)} ms (${report.samples} samples)`,
  );
}

load.kill();
await relay.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  `relay bench (node ${process.version}, loopback, payload ~80 bytes)\n${results.join('\n')}\n`,
);
