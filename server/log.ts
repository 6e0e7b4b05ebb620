import { writeSync } from 'node:fs';
import pino, { type Logger } from 'pino';
import type { LogLevel } from './config/common.ts';

export type { Logger };

export interface LoggerOptions {
  /**
   * Short human-readable lines (`09:41:07 WARN  message key=value`) instead of JSON. Meant for a
   * terminal: the command line turns it on when stderr is a TTY; pipes and journald get JSON.
   */
  human?: boolean;
  /** Colour the level in human lines (default: on unless NO_COLOR is set). */
  colour?: boolean;
}

/**
 * One line per event on stderr (stdout is kept for the lines a user reads: URLs and dev-mode
 * magic links): JSON, or a short human line on a terminal. Writes are synchronous so nothing is
 * lost on exit.
 */
export function createLogger(
  level: LogLevel,
  destination: pino.DestinationStream | number = 2,
  options: LoggerOptions = {},
): Logger {
  let stream =
    typeof destination === 'number'
      ? pino.destination({ fd: destination, sync: true })
      : destination;
  if (options.human) {
    const fd = typeof destination === 'number' ? destination : undefined;
    const target = stream;
    const colour = options.colour ?? process.env.NO_COLOR === undefined;
    stream = {
      write(line: string) {
        const text = `${humanLine(line, colour)}\n`;
        if (fd === undefined) target.write(text);
        else writeSync(fd, text);
      },
    };
  }
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

const levelColours: Record<string, string> = {
  fatal: '\u001b[41;97m',
  error: '\u001b[31m',
  warn: '\u001b[33m',
  info: '\u001b[36m',
  debug: '\u001b[90m',
  trace: '\u001b[90m',
};

/** A JSON log line as a terminal line: time, level, message, then the fields as key=value. */
export function humanLine(json: string, colour = false): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.trimEnd();
  }
  const { level, time, msg, ...fields } = record;
  const clock = typeof time === 'string' ? time.slice(11, 19) : '';
  const label = String(level ?? '')
    .toUpperCase()
    .padEnd(5);
  const shown = colour ? `${levelColours[String(level)] ?? ''}${label}\u001b[0m` : label;
  const rest = Object.entries(fields).map(([key, value]) => `${key}=${fieldText(value)}`);
  return [clock, shown, String(msg ?? ''), ...rest].filter((part) => part !== '').join(' ');
}

function fieldText(value: unknown): string {
  // A serialized Error: its message is the line; the stack stays for the JSON form.
  if (typeof value === 'object' && value !== null && 'message' in value && 'stack' in value)
    return fieldText(String(value.message));
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}
