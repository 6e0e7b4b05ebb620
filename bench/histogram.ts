/**
 * Latencies counted in logarithmic buckets 1 % wide (from 1 µs up), so that the latency windows
 * of a whole run can be pooled into one distribution per server: its p99 rests on every sample
 * of the run instead of being the median of short windows' p99s, which the machine's scheduling
 * stalls scatter widely.
 */
export type Histogram = Record<number, number>;

const width = Math.log(1.01);

function bucketOf(ms: number): number {
  return Math.max(0, Math.floor(Math.log(ms * 1000) / width));
}

export function addSample(histogram: Histogram, ms: number): void {
  const bucket = bucketOf(ms);
  histogram[bucket] = (histogram[bucket] ?? 0) + 1;
}

export function mergeInto(into: Histogram, from: Histogram): void {
  for (const [bucket, count] of Object.entries(from)) {
    into[Number(bucket)] = (into[Number(bucket)] ?? 0) + count;
  }
}

/** The value (ms, the middle of its bucket) below which the fraction `p` of the samples lie. */
export function percentileOf(histogram: Histogram, p: number): number {
  const buckets = Object.keys(histogram)
    .map(Number)
    .sort((a, b) => a - b);
  const total = sampleCount(histogram);
  const rank = Math.min(total - 1, Math.floor(total * p));
  let seen = 0;
  for (const bucket of buckets) {
    seen += histogram[bucket] ?? 0;
    if (seen > rank) return Math.exp((bucket + 0.5) * width) / 1000;
  }
  return Number.NaN;
}

export function sampleCount(histogram: Histogram): number {
  let total = 0;
  for (const count of Object.values(histogram)) total += count;
  return total;
}
