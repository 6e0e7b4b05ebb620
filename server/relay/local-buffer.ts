import type { RelayConfig } from '../config/relay-config.ts';
import type { Logger } from '../log.ts';
import { type MessageBuffer, openMessageBuffer } from './buffer.ts';
import type { RelayMetrics } from './metrics.ts';

/**
 * Opens the single-node relay's SQLite buffer (`sqlite.path`) with the limits of relay.conf; its
 * events become the relay's metrics and log lines. Throws when the file cannot be opened.
 */
export function openLocalBuffer(
  config: RelayConfig,
  expiredRetentionMs: number,
  metrics: RelayMetrics,
  logger: Logger,
): MessageBuffer {
  let bufferFailing = false;
  return openMessageBuffer(
    config.sqlitePath,
    {
      windowMs: config.bufferSeconds * 1_000,
      maxMessages: config.bufferMaxMessages,
      deviceMaxBytes: config.bufferDeviceMaxBytes,
      userMaxBytes: config.bufferUserMaxBytes,
      maxBytes: config.bufferMaxBytes,
      expiredRetentionMs,
    },
    {
      droppedExpired: (count) => {
        metrics.bufferDroppedExpired += count;
      },
      droppedCap: (count) => {
        metrics.bufferDroppedCap += count;
      },
      droppedBound: (scope, count) => {
        if (scope === 'user') metrics.bufferDroppedUserBound += count;
        else metrics.bufferDroppedBufferBound += count;
      },
      flushed: () => {
        metrics.bufferFlushes++;
      },
      failed: (err, lost) => {
        metrics.bufferWriteFailures++;
        metrics.bufferDroppedWriteFailed += lost;
        // One line when the failures start; the metrics count every one after it.
        if (!bufferFailing)
          logger.error(
            { err, lost },
            'buffer write failed (dropped, with gap for their devices): the relay reports itself unhealthy until a write succeeds',
          );
        bufferFailing = true;
      },
      recovered: () => {
        bufferFailing = false;
        logger.info('buffer writes succeed again');
      },
      unhealthy: (err) => {
        logger.error({ err }, 'buffer database unusable: the relay reports itself unhealthy');
      },
      opened: ({ migrated, vacuumFailed }) => {
        if (migrated !== undefined)
          logger.info(
            { fromVersion: migrated.fromVersion, references: migrated.references },
            'buffer database migrated to the current layout: everything kept is still delivered',
          );
        if (vacuumFailed !== undefined)
          logger.warn(
            { err: vacuumFailed },
            'buffer database could not be vacuumed once: it keeps its size until a later start',
          );
      },
    },
  );
}
