import type { KV } from '@nats-io/kv';
import type { Logger } from '../log.ts';

/** An offset from NATS's clock beyond this is said in a warning line (and again when it moves). */
export const skewWarnMs = 2_000;
/** The offset is the best of this many recent samples (the one with the shortest round trip). */
const samplesKept = 8;

/**
 * The clock the nodes of a cluster share: this node's clock corrected by its offset from NATS's,
 * measured on each heartbeat (the time JetStream stamped on it, against the middle of the round
 * trip that stored it). What one node records and another compares (when a device dropped,
 * whether its buffer window passed) is on this clock, so a node whose own clock is wrong
 * neither drops what is kept for a device nor keeps it past its window. The offset is shown on
 * `/health` (`cluster.clockOffsetMs`) and one beyond {@link skewWarnMs} is said in the log.
 */
export interface ClusterClock {
  /** Now on the cluster's clock (ms). */
  now(): number;
  /** NATS's clock minus this node's (ms); undefined before the first heartbeat. */
  readonly offsetMs: number | undefined;
  /**
   * Stores `value()` (a heartbeat) under `key` and measures the offset from the time JetStream
   * stamped on it; resolves with the revision written.
   */
  beat(kv: KV, key: string, value: () => Uint8Array): Promise<number>;
}

export function createClusterClock(local: () => number, logger: Logger): ClusterClock {
  const samples: Array<{ offset: number; uncertainty: number }> = [];
  let offsetMs: number | undefined;
  let saidMs: number | undefined;

  function take(offset: number, uncertainty: number): void {
    samples.push({ offset, uncertainty });
    if (samples.length > samplesKept) samples.shift();
    let best = samples[0] ?? { offset, uncertainty };
    for (const sample of samples) if (sample.uncertainty < best.uncertainty) best = sample;
    offsetMs = best.offset;
    const skewed = Math.abs(offsetMs) > skewWarnMs;
    if (skewed && (saidMs === undefined || Math.abs(offsetMs - saidMs) > skewWarnMs)) {
      saidMs = offsetMs;
      logger.warn(
        { offsetMs: Math.round(offsetMs) },
        `cluster: this node's clock is ${(Math.abs(offsetMs) / 1000).toFixed(1)} s ${offsetMs > 0 ? 'behind' : 'ahead of'} NATS's; buffer windows use NATS's clock, device checks over NATS the auth processes', those over auth.url this node's (refused past 300 s): set its time (NTP)`,
      );
    } else if (!skewed && saidMs !== undefined) {
      saidMs = undefined;
      logger.info(
        { offsetMs: Math.round(offsetMs) },
        "cluster: this node's clock agrees with NATS's again",
      );
    }
  }

  return {
    now: () => local() + (offsetMs ?? 0),
    get offsetMs() {
      return offsetMs;
    },
    async beat(kv, key, value) {
      const before = local();
      const revision = await kv.put(key, value());
      const after = local();
      const entry = await kv.get(key);
      if (entry !== null && entry.revision === revision) {
        take(entry.created.getTime() - (before + after) / 2, (after - before) / 2);
      }
      return revision;
    },
  };
}
