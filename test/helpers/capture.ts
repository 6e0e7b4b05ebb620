import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../server/log.ts';

/** A logger whose lines are kept in memory, so tests can assert what was (not) logged. */
export function captureLogger(level: 'debug' | 'info' | 'warn' = 'debug'): {
  logger: Logger;
  lines: string[];
} {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  return { logger: createLogger(level, stream), lines };
}
