/**
 * What one bench run measured: samples by key (medians and min–max spreads), pooled latency
 * histograms, the verdicts against the targets, and the printed lines (kept for
 * docs/performance-run.md). One run per process, so the state is the module's.
 */
import type { Histogram } from './histogram.ts';
import type { ServerKind } from './protocol.ts';

const samples = new Map<string, number[]>();

/** Adds one sample under `key` (`BENCH_VERBOSE=1` prints it on stderr). */
export function record(key: string, value: number): void {
  if (process.env.BENCH_VERBOSE) process.stderr.write(`  ${key} = ${value.toFixed(2)}\n`);
  let list = samples.get(key);
  if (list === undefined) {
    list = [];
    samples.set(key, list);
  }
  list.push(value);
}

export function has(key: string): boolean {
  return samples.has(key);
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? Number.NaN)
    : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
}

/** The median of the samples of `key`. */
export const med = (key: string) => median(samples.get(key) ?? []);

/** "min–max" of the samples of `key`; empty with fewer than two. */
export function spread(key: string, digits: number): string {
  const list = samples.get(key) ?? [];
  if (list.length < 2) return '';
  return `${Math.min(...list).toFixed(digits)}–${Math.max(...list).toFixed(digits)}`;
}

/** "median (min–max)" of `key`. */
export function medianWithSpread(key: string, digits: number): string {
  const s = spread(key, digits);
  return `${med(key).toFixed(digits)}${s === '' ? '' : ` (${s})`}`;
}

/** Every latency sample of the compared servers, pooled over all windows and rounds. */
export const pooledLatency = new Map<ServerKind, Histogram>();

export function latencyOf(kind: ServerKind): Histogram {
  let histogram = pooledLatency.get(kind);
  if (histogram === undefined) {
    histogram = {};
    pooledLatency.set(kind, histogram);
  }
  return histogram;
}

/** Every printed line, in order. */
export const lines: string[] = [];

export function print(line = ''): void {
  lines.push(line);
  process.stdout.write(`${line}\n`);
}

interface Verdict {
  name: string;
  value: number;
  limit: number;
  atMost: boolean;
  unit: string;
}

const verdicts: Verdict[] = [];

/** A measured value against its limit (an infinite limit: shown, no target). */
export function verdict(v: Verdict): void {
  verdicts.push(v);
}

/** The ratio of the medians of `a` and `b` against `limit`; left out when either is missing. */
export function ratio(name: string, a: string, b: string, limit: number, atMost = true): void {
  if (!samples.has(a) || !samples.has(b)) return;
  verdict({ name, value: med(a) / med(b), limit, atMost, unit: '×' });
}

export function printVerdicts(): void {
  if (verdicts.length === 0) return;
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
}
