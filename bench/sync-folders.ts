/**
 * The folder section of `npm run bench:sync` (alone: `npm run bench:sync-folders`): files
 * written into a folder on device A until device B holds them all, byte for byte, through
 * sync-host (a host process and two `sync-host sync` processes) against Syncthing (two
 * instances on loopback) and, as the floor, one `rsync -a` push to an rsync daemon on loopback.
 *
 * - small: 1,000 text files of 1 to 8 KiB (4.6 MB) in 20 folders;
 * - large: one file of 100 MiB of random bytes;
 * - many (only when named): 10,000 text files of 1 to 8 KiB in 20 folders;
 * - file counts, mixed content: 9 in 10 notes of 1 to 6 KiB, 1 in 10 binaries of 20 to 200 KiB,
 *   50 to a folder in nested folders; 1,000 and 10,000 files, and 100,000 with `--full`
 *   (`npm run bench:sync-folders -- --full`). Each count also reports the peak RSS of A and B
 *   against Syncthing's, their RSS once idle after the sync (3 s under 2 % of a core, then 5 s),
 *   the time per file and how it grows with the count, and the issue's targets.
 *
 * Every round starts a new pair (new homes, new project, empty folders), lets it settle, writes
 * the files on A, then starts the clock; Syncthing is asked to scan at once (its watcher would
 * wait 1 to 10 s first), sync-host's own watcher reacts. Done when B holds every file at its size
 * and its SHA-256 (B's folder polled every 20 ms). Bytes: the TCP payload on every socket of A's
 * and B's processes to the relay (sync-host) or to each other (Syncthing) from before the write
 * until 1 s after the end, as the kernel counts them (`ss -tinp`); Syncthing's own count from
 * its REST API (/rest/system/connections) besides. Rounds alternate the systems' order; medians.
 *
 * BENCH_ROUNDS (default 3), BENCH_FOLDER_CASES (default `small,large`, `many` as well when named;
 * empty: none), BENCH_FOLDER_COUNTS (default `1000,10000`; empty: none; `--full` adds 100000),
 * BENCH_PROFILE=<dir> (`--cpu-prof` of sync-host's processes), BENCH_SOURCES=1 (sync-host from its
 * sources, not the compiled program the bench builds first: bench/sync-host-folder.ts). Without
 * the `syncthing` binary (SYNCTHING names another) its rows are skipped with a line saying so.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { metricAt } from '../test/helpers/metrics.ts';
import {
  type CountMeasure,
  fileCounts,
  recordCount,
  reportCounts,
  settle,
  treeCpuMs,
  treeMiB,
} from './folder-counts.ts';
import {
  bytesBetween,
  type Expected,
  socketBytes,
  waitForFiles,
  writeLargeFile,
  writeMixedFiles,
  writeSmallFiles,
} from './folder-files.ts';
import { RsyncDaemon, rsyncBinary } from './rsync-floor.ts';
import { median, print, printVerdicts } from './stats.ts';
import { SyncHostBench, type SyncProcess } from './sync-host-folder.ts';
import { syncthingBinary, syncthingPair } from './syncthing.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const counts = fileCounts(process.argv, process.env.BENCH_FOLDER_COUNTS);
const caseNames = [
  ...(process.env.BENCH_FOLDER_CASES ?? 'small,large').split(',').filter((name) => name !== ''),
  ...counts.map((count) => `files-${count}`),
];

interface Case {
  label: string;
  write(dir: string): Expected;
  /** The file count of a count case: its time per file, idle RSS and targets are reported. */
  count?: number;
}

const cases: Record<string, Case> = {
  small: { label: '1,000 small files', write: (dir) => writeSmallFiles(dir, 1_000) },
  many: { label: '10,000 small files', write: (dir) => writeSmallFiles(dir, 10_000) },
  large: {
    label: 'one 100 MiB file',
    write: (dir) => writeLargeFile(dir, 'large.bin', 100 * 1_048_576),
  },
};
for (const count of counts) {
  cases[`files-${count}`] = {
    label: `${count.toLocaleString('en-US')} mixed files`,
    write: (dir) => writeMixedFiles(dir, count),
    count,
  };
}
for (const name of caseNames) {
  if (cases[name] === undefined) throw new Error(`BENCH_FOLDER_CASES: no case ${name}`);
}

/** 10 min, or 20 ms a file when that is longer (100,000 files: 33 min). */
const deadlineMs = (files: number) => Math.max(10 * 60_000, files * 20);

/** A pair of devices ready to sync `dirA` to `dirB`. */
interface Pair {
  /** A's and B's processes, and the ports their sockets of the transfer use. */
  pids: [number, number];
  /** Every process whose CPU time the transfer takes: A, B and the host when there is one. */
  cpuPids: number[];
  ports: number[];
  /**
   * A and B connect to each other: their sockets are the two ends of one connection (each byte
   * counted once, at A), not each its own connection to a host.
   */
  direct: boolean;
  /** Right after the files are written on A (inside the timed span). */
  written(): Promise<void>;
  /** The system's own count of bytes on the wire, when it has one. */
  ownCount?(): Promise<number>;
  /** Whether B held new files back under a receive limit, when it has one. */
  held?(): boolean;
  close(): Promise<void>;
}

interface FolderSystem {
  name: string;
  pair(root: string, round: string, dirA: string, dirB: string): Promise<Pair>;
}

interface Measure extends CountMeasure {
  sentByA: number;
  receivedByB: number;
  /** Every connection's bytes both ways, each byte once. */
  onTheWire: number;
  ownCount: number;
}

function syncHostSystem(bench: SyncHostBench): FolderSystem {
  return {
    name: 'sync-host',
    async pair(root, round, dirA, dirB) {
      const [a, b] = (await bench.pair(root, round, dirA, dirB)) as [SyncProcess, SyncProcess];
      const statusUrl = await bench.host.process.url('status');
      const slowReceivers = () => metricAt(statusUrl, 'relay_slow_receivers_total');
      const slowBefore = await slowReceivers();
      return {
        pids: [a.child.pid ?? 0, b.child.pid ?? 0],
        cpuPids: [a.child.pid ?? 0, b.child.pid ?? 0, bench.host.process.child.pid ?? 0],
        ports: [bench.relayPort],
        direct: false,
        written: async () => {},
        held: () => /holding \d+ new file/.test(b.output.join('')),
        close: async () => {
          await a.stop();
          await b.stop();
          // a receiver the relay closed mid-burst (1013) catches up again: said, it costs time
          const closed = (await slowReceivers()) - slowBefore;
          if (closed > 0) console.log(`  sync-host: the relay closed a slow receiver ${closed}×`);
        },
      };
    },
  };
}

function syncthingSystem(binary: string): FolderSystem {
  return {
    name: 'Syncthing',
    async pair(root, _round, dirA, dirB) {
      const [a, b] = await syncthingPair(binary, root, 'bench', dirA, dirB);
      const totals = async () => {
        const counted = await a.totals();
        return counted.in + counted.out;
      };
      const start = await totals();
      return {
        pids: [a.child.pid ?? 0, b.child.pid ?? 0],
        cpuPids: [a.child.pid ?? 0, b.child.pid ?? 0],
        ports: [a.listenPort, b.listenPort],
        direct: true,
        written: () => a.scan('bench'),
        ownCount: async () => (await totals()) - start,
        close: async () => {
          await a.stop();
          await b.stop();
        },
      };
    },
  };
}

/** Runs `work` on a new temp folder holding the empty folders `a` and `b`; removes it after. */
async function withFolders<T>(work: (root: string, dirA: string, dirB: string) => Promise<T>) {
  const root = mkdtempSync(join(tmpdir(), 'bench-folders-'));
  try {
    mkdirSync(join(root, 'a'));
    mkdirSync(join(root, 'b'));
    return await work(root, join(root, 'a'), join(root, 'b'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function measure(system: FolderSystem, name: string, round: number): Promise<Measure> {
  return withFolders(async (root, dirA, dirB) => {
    const pair = await system.pair(root, `${name}-${round}`, dirA, dirB);
    try {
      // Settled: nothing left from the start-up on the sockets counted below.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const before = socketBytes(pair.pids, pair.ports);
      const cpuBefore = pair.cpuPids.map(treeCpuMs);
      const expected = cases[name]!.write(dirA);
      const started = performance.now();
      await pair.written();
      const ms = await waitForFiles(dirB, expected, started, deadlineMs(expected.size));
      const cpu = pair.cpuPids.map((pid, i) => treeCpuMs(pid) - (cpuBefore[i] ?? 0));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const spent = bytesBetween(before, socketBytes(pair.pids, pair.ports));
      const [a, b] = pair.pids.map((pid) => spent.get(pid) ?? { sent: 0, received: 0 }) as [
        { sent: number; received: number },
        { sent: number; received: number },
      ];
      const peakMiB = pair.pids.map((pid) => treeMiB(pid, 'VmHWM'));
      // The idle memory only where it is reported: settling takes 8 s or more.
      const settleMs = cases[name]!.count === undefined ? 0 : await settle(pair.cpuPids);
      return {
        ms,
        sentByA: a.sent,
        receivedByB: b.received,
        onTheWire: a.sent + a.received + (pair.direct ? 0 : b.sent + b.received),
        ownCount: (await pair.ownCount?.()) ?? Number.NaN,
        cpuMs: cpu,
        peakMiB,
        idleMiB: settleMs === 0 ? [] : pair.pids.map((pid) => treeMiB(pid, 'VmRSS')),
        settleMs,
        held: pair.held?.() ?? false,
      };
    } finally {
      await pair.close();
    }
  });
}

function rsyncFloor(name: string): Promise<Measure> {
  return withFolders(async (root, dirA, dirB) => {
    const daemon = await RsyncDaemon.start(root, dirB);
    try {
      const expected = cases[name]!.write(dirA);
      const started = performance.now();
      const counted = daemon.push(dirA);
      const ms = await waitForFiles(dirB, expected, started, deadlineMs(expected.size));
      const both = counted.sent + counted.received;
      return {
        ms,
        sentByA: counted.sent,
        receivedByB: counted.sent,
        onTheWire: both,
        ownCount: both,
        cpuMs: [],
        peakMiB: [],
        idleMiB: [],
        settleMs: 0,
        held: false,
      };
    } finally {
      await daemon.stop();
    }
  });
}

/** Median CPU time in all, then of each process (A, B, the host), or a dash when not measured. */
function cpuCell(list: Measure[]): string {
  const parts = list[0]?.cpuMs.length ?? 0;
  if (parts === 0) return '–';
  const total = median(list.map((m) => m.cpuMs.reduce((a, b) => a + b, 0)));
  const each = Array.from({ length: parts }, (_, i) => median(list.map((m) => m.cpuMs[i] ?? 0)));
  return `${total.toFixed(0)} ms (${each.map((ms) => ms.toFixed(0)).join(' / ')})`;
}

const bytes = (n: number) => (Number.isNaN(n) ? '–' : Math.round(n).toLocaleString('en-US'));

/** The rounds of case `name`: each system's measures, rounds alternating the systems' order. */
async function runCase(
  name: string,
  systems: FolderSystem[],
  rsync: string | undefined,
): Promise<Map<string, Measure[]>> {
  const results = new Map<string, Measure[]>();
  const count = cases[name]!.count;
  for (let round = 0; round < rounds; round += 1) {
    const order = round % 2 === 0 ? systems : [...systems].reverse();
    for (const system of order) {
      const measured = await measure(system, name, round);
      if (count !== undefined) recordCount(count, system.name, measured);
      results.set(system.name, [...(results.get(system.name) ?? []), measured]);
    }
    if (rsync !== undefined) {
      const list = results.get('rsync (floor)') ?? [];
      list.push(await rsyncFloor(name));
      results.set('rsync (floor)', list);
    }
  }
  return results;
}

/** The rows of case `name`: bytes, CPU and time against Syncthing; peak RSS below each. */
function printCase(name: string, results: Map<string, Measure[]>): void {
  const reference = results.get('Syncthing');
  const referenceMs = reference === undefined ? Number.NaN : median(reference.map((m) => m.ms));
  for (const [system, list] of results) {
    const ms = median(list.map((m) => m.ms));
    const pick = (key: 'sentByA' | 'receivedByB' | 'onTheWire' | 'ownCount') =>
      bytes(median(list.map((m) => m[key])));
    const cpu = cpuCell(list);
    const ratio = Number.isNaN(referenceMs) ? '–' : `${(ms / referenceMs).toFixed(2)}×`;
    print(
      `| ${cases[name]!.label} | ${system} | ${ms.toFixed(0)} ms | ${pick('sentByA')} | ${pick('receivedByB')} | ${pick('onTheWire')} | ${pick('ownCount')} | ${cpu} | ${ratio} |`,
    );
    const peak = [0, 1].map((i) => median(list.map((m) => m.peakMiB[i] ?? 0)).toFixed(0));
    if (list[0]?.peakMiB.length) print(`  ${system}: peak RSS A / B ${peak.join(' / ')} MiB`);
  }
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const systems: FolderSystem[] = [];
  const host = await SyncHostBench.start();
  systems.push(syncHostSystem(host));
  const syncthing = syncthingBinary();
  if (syncthing === undefined) {
    const named = process.env.SYNCTHING ?? 'syncthing';
    print(
      `Syncthing: skipped, \`${named} --version\` does not run (apt-get install syncthing, or SYNCTHING=<path>)`,
    );
  } else {
    systems.push(syncthingSystem(syncthing));
  }
  const rsync = rsyncBinary();
  if (rsync === undefined) print('rsync floor: skipped, no `rsync` binary on PATH');
  print(
    `folder sync, A to B through each system: medians of ${rounds} rounds; load average ${load()} at the start`,
  );
  print(
    '| case | system | time to B | sent by A | received by B | on the wire, both ways | own count | CPU (A / B / host) | time ÷ Syncthing |',
  );
  print('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  try {
    for (const name of caseNames) printCase(name, await runCase(name, systems, rsync));
  } finally {
    await host.close();
  }
  reportCounts(
    counts,
    systems.map((system) => system.name),
    rounds,
  );
  printVerdicts();
  print(`load average ${load()} at the end`);
}

await main();
