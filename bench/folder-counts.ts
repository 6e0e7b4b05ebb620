/**
 * The file counts of the folder section of `npm run bench:sync` (bench/sync-folders.ts): which
 * counts a run measures, what each round of one adds to the samples (bench/stats.ts), the table
 * of time, CPU and memory per count, sync-host against Syncthing, the time per file as the count
 * grows, and the targets.
 */
import { readFileSync } from 'node:fs';
import { childrenOf, cpuMs } from './folder-files.ts';
import { has, med, print, ratio, record, verdict } from './stats.ts';

/**
 * The counts of this run: BENCH_FOLDER_COUNTS (default `1000,10000`; empty: none), with 100,000
 * added by `--full`.
 */
export function fileCounts(argv: string[], env: string | undefined): number[] {
  const counts = (env ?? '1000,10000')
    .split(',')
    .filter((part) => part.trim() !== '')
    .map(Number);
  for (const count of counts) {
    if (!Number.isInteger(count) || count < 1) {
      throw new Error(`BENCH_FOLDER_COUNTS: ${count} is not a file count`);
    }
  }
  if (argv.includes('--full') && !counts.includes(100_000)) counts.push(100_000);
  return counts.sort((a, b) => a - b);
}

/** What one round of a count measured, for one system. */
export interface CountMeasure {
  ms: number;
  /** CPU time of each process: A, B and, for sync-host, the host. */
  cpuMs: number[];
  /** Peak RSS (VmHWM) of A and B, MiB. */
  peakMiB: number[];
  /** RSS (VmRSS) of A and B once the system is idle after the sync, MiB. */
  idleMiB: number[];
  /** From B holding every file until the system was idle. */
  settleMs: number;
  /** Whether B said it held new files back under its receive limit (sync-host only). */
  held: boolean;
}

/** A field of /proc/<pid>/status in MiB (`VmHWM`: the peak RSS, `VmRSS`: now); 0 when gone. */
function statusMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const found = new RegExp(`${field}:\\s+(\\d+) kB`).exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return found === null ? 0 : Number(found[1]) / 1024;
  } catch {
    return 0;
  }
}

/**
 * `field` of the largest process in `pid`'s tree (Syncthing's work runs in a child of the
 * process started).
 */
export function treeMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  return Math.max(...[pid, ...childrenOf(pid)].map((each) => statusMiB(each, field)));
}

/** CPU time of `pid` and its children. */
export const treeCpuMs = (pid: number) =>
  childrenOf(pid).reduce((sum, child) => sum + cpuMs(child), cpuMs(pid));

const quietWindowMs = 1_000;
/** CPU time under which a window counts as quiet: 2 % of a core, for all the processes. */
const quietCpuMs = 20;
const quietWindows = 3;
const settleLimitMs = 120_000;
/** How long the processes are left idle before their RSS is read. */
const idleMs = 5_000;

/**
 * Waits until the processes of `pids` (with their children) used under 20 ms of CPU in each of
 * 3 windows of 1 s in a row (at most 2 min), then 5 s more; resolves with the time that took.
 */
export async function settle(pids: number[]): Promise<number> {
  const started = performance.now();
  const total = () => pids.reduce((sum, pid) => sum + treeCpuMs(pid), 0);
  let quiet = 0;
  let last = total();
  while (quiet < quietWindows && performance.now() - started < settleLimitMs) {
    await new Promise((resolve) => setTimeout(resolve, quietWindowMs));
    const now = total();
    quiet = now - last < quietCpuMs ? quiet + 1 : 0;
    last = now;
  }
  await new Promise((resolve) => setTimeout(resolve, idleMs));
  return performance.now() - started;
}

const key = (count: number, system: string, what: string) => `folders.${count}.${system}.${what}`;

/** Adds one round of `count` files through `system` to the samples. */
export function recordCount(count: number, system: string, m: CountMeasure): void {
  record(key(count, system, 'ms'), m.ms);
  record(key(count, system, 'perFileMs'), m.ms / count);
  const cpuTotal = m.cpuMs.reduce((a, b) => a + b, 0);
  record(key(count, system, 'cpuMs'), cpuTotal);
  record(key(count, system, 'cpuPerFileMs'), cpuTotal / count);
  for (const [i, ms] of m.cpuMs.entries()) record(key(count, system, `cpu${i}`), ms);
  for (const [i, mib] of m.peakMiB.entries()) record(key(count, system, `peak${i}`), mib);
  for (const [i, mib] of m.idleMiB.entries()) record(key(count, system, `idle${i}`), mib);
  record(key(count, system, 'idleMax'), Math.max(...m.idleMiB));
  record(key(count, system, 'settleMs'), m.settleMs);
  record(key(count, system, 'held'), m.held ? 1 : 0);
}

const grouped = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** "a / b" of the medians of `what0`, `what1`… of one count and system. */
function perProcess(count: number, system: string, what: string, parts: number): string {
  return Array.from({ length: parts }, (_, i) =>
    grouped(med(key(count, system, `${what}${i}`))),
  ).join(' / ');
}

/** `what` of sync-host ÷ Syncthing at `count`, or a dash without Syncthing. */
function againstSyncthing(count: number, what: string): string {
  if (!has(key(count, 'Syncthing', what))) return '–';
  return `${(med(key(count, 'sync-host', what)) / med(key(count, 'Syncthing', what))).toFixed(2)}×`;
}

function countRow(count: number, system: string): void {
  const at = (what: string) => med(key(count, system, what));
  const host = system === 'sync-host';
  const cpuParts = host ? 3 : 2;
  const ratios = host
    ? [
        againstSyncthing(count, 'ms'),
        `${againstSyncthing(count, 'peak0')} / ${againstSyncthing(count, 'peak1')}`,
      ]
    : ['1.00×', '1.00× / 1.00×'];
  print(
    `| ${grouped(count)} | ${system} | ${grouped(at('ms'))} ms | ${grouped(at('perFileMs'), 2)} ms | ${ratios[0]} | ${grouped(at('cpuMs'))} ms (${perProcess(count, system, 'cpu', cpuParts)}) | ${perProcess(count, system, 'peak', 2)} MiB | ${ratios[1]} | ${perProcess(count, system, 'idle', 2)} MiB (${grouped(at('settleMs') / 1_000, 1)} s) |`,
  );
}

/**
 * The time and the CPU time per file at the largest count ÷ at the smallest, per system (the CPU
 * time moves less with the machine's load than the time).
 */
function linearity(counts: number[], systems: string[]): void {
  const [smallest, largest] = [counts[0], counts.at(-1)];
  if (smallest === undefined || largest === undefined || smallest === largest) return;
  for (const [label, what] of [
    ['time', 'perFileMs'],
    ['CPU time', 'cpuPerFileMs'],
  ] as const) {
    const each = systems.map((system) => {
      const value = med(key(largest, system, what)) / med(key(smallest, system, what));
      return `${system} ${value.toFixed(2)}×`;
    });
    print(
      `${label} per file, ${grouped(largest)} ÷ ${grouped(smallest)} files: ${each.join(', ')}`,
    );
  }
}

/** A line for each count at which sync-host's B held files back in most rounds. */
function heldBack(counts: number[]): void {
  for (const count of counts) {
    if (!(med(key(count, 'sync-host', 'held')) > 0)) continue;
    print(
      `${grouped(count)} files: sync-host's B held new files back under its receive limit (SYNC_HOST_MAX_NEW_FILES)`,
    );
  }
}

/** The targets for folders of any size, with what this run measured of them. */
function targets(counts: number[]): void {
  if (counts.includes(10_000)) {
    const at = (system: string, what: string) => key(10_000, system, what);
    ratio(
      '10,000 files: time, sync-host ÷ Syncthing',
      at('sync-host', 'ms'),
      at('Syncthing', 'ms'),
      1.5,
    );
    for (const [i, side] of ['A', 'B'].entries()) {
      ratio(
        `10,000 files: peak RSS of ${side}, sync-host ÷ Syncthing`,
        at('sync-host', `peak${i}`),
        at('Syncthing', `peak${i}`),
        2,
      );
    }
    verdict({
      name: 'idle `sync` after 10,000 files: RSS of the larger of A and B',
      value: med(at('sync-host', 'idleMax')),
      limit: 150,
      atMost: true,
      unit: ' MiB',
    });
  }
  const largest = counts.at(-1);
  if (largest === undefined || largest === 1_000 || !counts.includes(1_000)) return;
  verdict({
    name: `sync-host time per file, ${grouped(largest)} ÷ 1,000 files${largest === 100_000 ? '' : ' (the target is at 100,000)'}`,
    value: med(key(largest, 'sync-host', 'perFileMs')) / med(key(1_000, 'sync-host', 'perFileMs')),
    limit: largest === 100_000 ? 1.3 : Number.POSITIVE_INFINITY,
    atMost: true,
    unit: '×',
  });
}

/**
 * The table of the counts (medians), the time per file as the count grows, and the targets
 * (printed with the others by printVerdicts).
 */
export function reportCounts(counts: number[], systems: string[], rounds: number): void {
  if (counts.length === 0) return;
  print();
  print(
    `File counts, mixed content (9 in 10 notes of 1 to 6 KiB, 1 in 10 binaries of 20 to 200 KiB, nested folders), medians of ${rounds} round(s):`,
  );
  print(
    '| files | system | time to B | time per file | time ÷ Syncthing | CPU (A / B / host) | peak RSS A / B | peak RSS ÷ Syncthing (A / B) | idle RSS A / B (settled after) |',
  );
  print('|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const count of counts) {
    for (const system of systems) if (has(key(count, system, 'ms'))) countRow(count, system);
  }
  linearity(
    counts,
    systems.filter((system) => counts.every((count) => has(key(count, system, 'ms')))),
  );
  heldBack(counts);
  targets(counts);
}
