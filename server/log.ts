import pino, { type Logger } from 'pino';
import type { LogLevel } from './config/common.ts';

export type { Logger };

/**
 * One JSON line per event on stderr (stdout is kept for the lines a user reads: URLs and
 * dev-mode magic links). Writes are synchronous so nothing is lost on exit.
 */
export function createLogger(
  level: LogLevel,
  destination: pino.DestinationStream | number = 2,
): Logger {
  const stream =
    typeof destination === 'number'
      ? pino.destination({ fd: destination, sync: true })
      : destination;
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
}
