import type { Db } from '../db/connect.ts';
import { pruneRevocations, unixSeconds } from '../db/revocations.ts';
import type { Logger } from '../log.ts';

/** How often the auth process deletes what it keeps only for a while. */
export const purgeIntervalMs = 60 * 60_000;

/**
 * How long a revocation row is kept for the relays' feed (`GET /relay/revocations`): 7 days. A
 * relay that was cut off from the auth service for longer gets `reset` and checks its connected
 * and cached devices again, so nothing it missed stays allowed.
 */
export const revocationRetentionMs = 7 * 24 * 60 * 60_000;

export interface PurgeOptions {
  db: Db;
  logger: Logger;
  now: () => number;
  /** Default purgeIntervalMs. */
  intervalMs?: number;
}

export interface Purge {
  /** Deletes what is past its retention now; resolves with the number of rows deleted. */
  run(): Promise<number>;
  stop(): void;
}

/**
 * Runs `remove(now)` on a schedule. The timer never keeps the process alive; a failure (the
 * database is down) is logged and retried at the next interval. `what` names the rows in the log.
 */
export function schedulePurge(
  what: string,
  remove: (db: Db, nowMs: number) => Promise<number>,
  options: PurgeOptions,
): Purge {
  const { db, logger, now } = options;
  async function run(): Promise<number> {
    try {
      const deleted = await remove(db, now());
      if (deleted > 0) logger.info({ deleted }, `${what} deleted`);
      return deleted;
    } catch (err: unknown) {
      logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        `${what} could not be deleted; retrying at the next interval`,
      );
      return 0;
    }
  }
  const timer = setInterval(() => void run(), options.intervalMs ?? purgeIntervalMs);
  timer.unref();
  return { run, stop: () => clearInterval(timer) };
}

/** Deletes revocation rows older than revocationRetentionMs (the latest one always stays). */
export function startRevocationPrune(options: PurgeOptions): Purge {
  return schedulePurge(
    'revocations older than 7 days',
    (db, nowMs) => pruneRevocations(db, unixSeconds(new Date(nowMs - revocationRetentionMs))),
    options,
  );
}
