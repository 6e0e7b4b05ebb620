import type { Db } from '../db/connect.ts';
import { purgeMagicLinks } from '../db/magic-links.ts';
import type { Logger } from '../log.ts';

/** How often expired magic links are deleted. */
export const linkPurgeIntervalMs = 60 * 60_000;
/**
 * How long a link is kept after it expired, so that using it still answers `token_expired`
 * rather than `invalid_token` for a day.
 */
export const expiredLinkRetentionMs = 24 * 60 * 60_000;

export interface LinkPurgeOptions {
  db: Db;
  logger: Logger;
  now: () => number;
  /** Default linkPurgeIntervalMs. */
  intervalMs?: number;
}

export interface LinkPurge {
  /** Deletes the links expired more than expiredLinkRetentionMs ago; resolves with their number. */
  run(): Promise<number>;
  stop(): void;
}

/**
 * Deletes expired magic links on a schedule. The timer never keeps the process alive; a failure
 * (the database is down) is logged and retried at the next interval.
 */
export function startLinkPurge(options: LinkPurgeOptions): LinkPurge {
  const { db, logger, now } = options;
  async function run(): Promise<number> {
    try {
      const deleted = await purgeMagicLinks(db, new Date(now() - expiredLinkRetentionMs));
      if (deleted > 0) logger.info({ deleted }, 'expired magic links deleted');
      return deleted;
    } catch (err: unknown) {
      logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'expired magic links could not be deleted; retrying at the next interval',
      );
      return 0;
    }
  }
  const timer = setInterval(() => void run(), options.intervalMs ?? linkPurgeIntervalMs);
  timer.unref();
  return { run, stop: () => clearInterval(timer) };
}
