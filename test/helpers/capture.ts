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

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
