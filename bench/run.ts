/**
 * `npm run bench` (full, a few minutes) and `npm run bench:quick`: the relay against the bare-ws
 * forwarder and Socket.IO, interleaved per round (relay, ws, Socket.IO, relay, ws, ...), each
 * server in a fresh process of its own per round and the load generator in another. Prints
 * medians, spreads (min–max over rounds) and the ratios of the performance targets; then the
 * durable buffer, the auth API against a bare express route on SQLite and PostgreSQL, the
 * scale curve (100 to 10,000 connections), large payloads (1 KiB to 512 KiB) and the connection
 * set-up with TLS against without (1,000 devices), and a room shared by 3 users through project
 * membership against one user's room of as many devices. With BENCH_TLS=1 every other section runs its
 * relay and bare ws over wss:// (one certificate for both). A full run
 * writes docs/performance-scale.svg and docs/performance-run.md. Flags: bench/options.ts;
 * sections: bench/sections/.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { benchOptions, runs } from './options.ts';
import { createProcesses } from './processes.ts';
import { reportAuth, runAuth } from './sections/auth.ts';
import { reportBuffer, runBuffer } from './sections/buffer.ts';
import { reportCompare, runCompare } from './sections/compare.ts';
import { runMemory } from './sections/memory.ts';
import { reportPayloads, runPayloads } from './sections/payloads.ts';
import { reportScale, runScale } from './sections/scale.ts';
import { reportShared, runShared } from './sections/shared.ts';
import { reportTlsSetup, runTlsSetup } from './sections/tls-setup.ts';
import { lines, print, printVerdicts } from './stats.ts';

/**
 * Whether ws masks and unmasks with bufferutil's native code in the servers and generators
 * (they inherit this process's environment; ws skips it when WS_NO_BUFFER_UTIL is set).
 */
function bufferUtilState(): string {
  if (process.env.WS_NO_BUFFER_UTIL) return 'off (WS_NO_BUFFER_UTIL set)';
  try {
    createRequire(import.meta.url)('bufferutil');
    return 'on';
  } catch {
    return 'off (not installed)';
  }
}

const options = benchOptions();
const procs = createProcesses(options);
const started = performance.now();

if (runs(options, 'compare')) await runCompare(options, procs);
if (runs(options, 'memory')) await runMemory(options, procs);
if (runs(options, 'buffer')) await runBuffer(options, procs);
if (runs(options, 'auth')) await runAuth(options, procs);
if (runs(options, 'scale')) await runScale(options, procs);
if (runs(options, 'payloads')) await runPayloads(options, procs);
if (runs(options, 'tls')) await runTlsSetup(options, procs);
if (runs(options, 'shared')) await runShared(options, procs);
procs.stopLoads();

const bufferUtil = bufferUtilState();
print(
  `# sync-host bench (${options.quick ? 'quick' : 'full'}): node ${process.version}, ${options.plan.rounds} rounds interleaved relay/ws/Socket.IO, loopback, bufferutil ${bufferUtil}`,
);
if (runs(options, 'compare') || runs(options, 'memory')) reportCompare(options);
if (runs(options, 'buffer')) reportBuffer();
if (runs(options, 'auth')) reportAuth();
if (runs(options, 'scale')) reportScale(options);
if (runs(options, 'payloads')) reportPayloads(options, bufferUtil);
if (runs(options, 'tls')) reportTlsSetup(options);
if (runs(options, 'shared')) reportShared();
printVerdicts();
print();
print(`(${((performance.now() - started) / 1000).toFixed(0)} s)`);
if (!options.quick && options.only === undefined) {
  writeFileSync(
    join(import.meta.dirname, '..', 'docs', 'performance-run.md'),
    `${lines.join('\n')}\n`,
  );
}
process.exit(0);
