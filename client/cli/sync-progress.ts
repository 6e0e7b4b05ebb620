import { reportedNames } from '../../protocol/relay-frames.ts';
import type { Transfer } from '../folder/blob-queue.ts';
import type { RelayConnection } from '../relay-connection.ts';
import type { CliIo } from './io.ts';
import { printable } from './printable.ts';

/** A transfer shows a progress line once it has run this long. */
const progressAfterMs = 3_000;
/**
 * Test-only: how long a transfer runs before its progress line shows, in ms (a test's transfer
 * is shorter than the default 3 s). Not documented for users.
 */
export const progressDelayVariable = 'SYNC_HOST_TEST_PROGRESS_MS';

/** The progress line's delay: the default unless the test variable is set. */
export function progressAfterMsFrom(env: NodeJS.ProcessEnv): number {
  const ms = Number(env[progressDelayVariable]);
  return env[progressDelayVariable] && Number.isFinite(ms) && ms >= 0 ? ms : progressAfterMs;
}
/** How often the line is drawn again: each second, sooner while its delay is shorter. */
function progressEveryMs(afterMs: number): number {
  return Math.min(1_000, Math.max(50, afterMs));
}
/** At most one folder report per this long. */
const reportEveryMs = 30_000;

/**
 * The progress line of `sync` on a terminal: for transfers of files running longer than a few
 * seconds, one line rewritten in place (`\r`) each second, cleared when they end and before any
 * other line (`clear`). Nothing when stdout is not a terminal (a service's log gets the
 * `sent`/`received` lines only).
 */
export function showProgress(
  io: CliIo,
  transfers: () => Transfer[],
  afterMs = progressAfterMs,
): { clear(): void; stop(): void } {
  if (io.stdout.isTTY !== true) return { clear: () => undefined, stop: () => undefined };
  let shown = false;
  const clear = () => {
    if (shown) io.stdout.write('\r\x1b[2K');
    shown = false;
  };
  const timer = setInterval(() => {
    const now = Date.now();
    const long = transfers().filter((t) => now - t.startedAt >= afterMs);
    if (long.length === 0) {
      clear();
      return;
    }
    const parts = long.map((t) => {
      const percent = t.totalBytes === 0 ? 100 : Math.floor((100 * t.doneBytes) / t.totalBytes);
      return `${t.direction === 'up' ? 'sending' : 'receiving'} ${t.path} ${percent}% of ${mebibytes(t.totalBytes)}`;
    });
    io.stdout.write(`\r\x1b[2K${printable(parts.join('; ')).slice(0, 200)}`);
    shown = true;
  }, progressEveryMs(afterMs));
  timer.unref();
  return {
    clear,
    stop() {
      clearInterval(timer);
      clear();
    },
  };
}

function mebibytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MiB`;
}

/** What a folder report tells the host: the live files of the folder here. */
export interface FolderCount {
  files: number;
  bytes: number;
  names: string[];
}

/**
 * Sends the host a `folder-report` (the count of live files and their bytes, the names only when
 * the project is not encrypted: the admin shows them) after the folder settled, at most once per
 * 30 s; `changed()` after each change, `stop()` at the end.
 */
export function folderReports(options: {
  connection: () => RelayConnection;
  doc: string;
  encrypted: boolean;
  count: () => FolderCount;
}): { changed(): void; stop(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastAt = 0;
  let last = '';
  const send = () => {
    timer = undefined;
    const connection = options.connection();
    if (connection.state !== 'joined') return;
    const { files, bytes, names } = options.count();
    const frame = {
      type: 'folder-report' as const,
      doc: options.doc,
      files,
      bytes,
      encrypted: options.encrypted,
      // As many names as the host keeps (`maxReportBytes`); the count and bytes are all of them.
      ...(options.encrypted ? {} : { names: reportedNames(options.doc, names) }),
    };
    const text = JSON.stringify(frame);
    if (text === last) return;
    try {
      connection.sendStoreFrame(frame);
      last = text;
      lastAt = Date.now();
    } catch {
      // Not joined after all: the next change sends it.
    }
  };
  return {
    changed() {
      if (timer !== undefined) return;
      timer = setTimeout(send, Math.max(2_000, lastAt + reportEveryMs - Date.now()));
      timer.unref();
    },
    stop: () => clearTimeout(timer),
  };
}
