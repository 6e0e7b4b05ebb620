/**
 * One benchmarked server in its own process (forked by bench/run.ts with --expose-gc), so that
 * its CPU time in /proc/<pid>/stat is that server's alone. `argv[2]` picks the server:
 *   relay   the product (createRelay: HMAC tokens, room checks, rate limit, metrics all on)
 *   ws      the bare-ws reference forwarder (bench/reference/bare-ws.ts)
 *   sio     the Socket.IO reference (bench/reference/socket-io.ts)
 * It reports `{kind:'ready', port}` over IPC and answers `stats` and `memory` requests. With
 * `BENCH_TLS=1` the relay and bare ws speak wss:// (bench/tls.ts). `relay store-off`: the relay
 * without its document store (bench/store-cpu.ts compares the two).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapSpaceStatistics } from 'node:v8';
import { createLogger } from '../server/log.ts';
import { createRelay } from '../server/relay/relay.ts';
import { testRelayConfig } from '../test/helpers/configs.ts';
import { type BenchServer, benchSecret, type ServerKind, type ServerReport } from './protocol.ts';
import { startBareWs } from './reference/bare-ws.ts';
import { startSocketIo } from './reference/socket-io.ts';
import { benchCertificate, benchTls } from './tls.ts';

const gc = (globalThis as { gc?: () => void }).gc;

async function startRelay(storeOff: boolean): Promise<BenchServer> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-bench-'));
  const relay = createRelay({
    // The bucket is checked on every frame; it is only sized so that it never drops.
    config: testRelayConfig(dir, {
      secret: benchSecret,
      ratePerSecond: 1_000_000,
      rateBurst: 1_000_000,
      // the load generator opens its connections from one address, many at a time
      maxUnjoinedPerAddress: 1_000_000,
    }),
    secret: benchSecret,
    logger: createLogger('silent'),
    tls: benchTls ? await benchCertificate() : undefined,
    ...(storeOff ? { store: null } : {}),
  });
  const ports = await relay.listen();
  return {
    port: ports.wsPort,
    dbPath: join(dir, 'relay.db'),
    delivered: () => relay.metrics.messagesDelivered,
    async close() {
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const kind = process.argv[2] as ServerKind;
const server =
  kind === 'relay'
    ? await startRelay(process.argv[3] === 'store-off')
    : kind === 'ws'
      ? await startBareWs()
      : await startSocketIo();

/** utime + stime of this process in seconds (clock ticks of 1/100 s), from /proc/self/stat. */
function cpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function cpuUsageSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

function send(report: ServerReport): void {
  process.send?.(report);
}

/**
 * `BENCH_CPU_PROF=<kind>`: the CPU profile of each measured window (not of the whole process)
 * into bench/profiles/; with `BENCH_HEAP_PROF=1` also a sampled allocation profile of it
 * (every allocation, collected or not), to compare bytes allocated per message.
 */
let profiler: Session | undefined;
const heapProfile = process.env.BENCH_HEAP_PROF === '1';

async function startProfile(): Promise<void> {
  profiler = new Session();
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
  await profiler.post('Profiler.start');
  if (heapProfile) {
    await profiler.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMinorGC: true,
      includeObjectsCollectedByMajorGC: true,
    });
  }
}

async function stopProfile(name: string): Promise<void> {
  if (profiler === undefined) return;
  const dir = join(import.meta.dirname, 'profiles');
  mkdirSync(dir, { recursive: true });
  const { profile } = await profiler.post('Profiler.stop');
  writeFileSync(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
  if (heapProfile) {
    const heap = await profiler.post('HeapProfiler.stopSampling');
    writeFileSync(join(dir, `${name}.heapprofile`), JSON.stringify(heap.profile));
  }
  profiler.disconnect();
  profiler = undefined;
}

type Request =
  | { kind: 'counters' | 'memory' | 'close' | 'profile-start' }
  | { kind: 'profile-stop'; name: string };

process.on('message', (request: Request) => {
  const answer = async () => {
    switch (request.kind) {
      case 'profile-start':
        await startProfile();
        return send({ kind: 'profiling' });
      case 'profile-stop':
        await stopProfile(request.name);
        return send({ kind: 'profiled' });
      case 'counters':
        return send({
          kind: 'counters',
          delivered: server.delivered(),
          cpuSeconds: cpuSeconds(),
          cpuUsageSeconds: cpuUsageSeconds(),
        });
      case 'memory':
        gc?.();
        gc?.();
        return send({
          kind: 'memory',
          ...process.memoryUsage(),
          newSpace:
            getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')
              ?.physical_space_size ?? 0,
        });
      case 'close':
        await server.close();
        process.exit(0);
    }
  };
  answer().catch((err: unknown) => {
    process.stderr.write(
      `bench server ${kind}: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exit(1);
  });
});
send({ kind: 'ready', port: server.port, dbPath: server.dbPath });
