import { mkdirSync, realpathSync, statSync } from 'node:fs';
import { docKeyOf } from '../doc-key.ts';
import type { E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import { listenNotices } from '../folder/blob-notices.ts';
import { folderDocName } from '../folder/document.ts';
import { FolderSync } from '../folder/folder-sync.ts';
import type { ReceiveLimits } from '../folder/receive-budget.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';
import { connectionTransfers } from './connection-transfers.ts';
import type { CliIo } from './io.ts';
import { printable } from './printable.ts';
import { folderReports, showProgress } from './sync-progress.ts';

/** The folder, its state log and the bounds of its sync. */
export interface SyncedFolderOptions {
  io: CliIo;
  /** The room's connections (a fresh one after a final close); started here. */
  supervisor: ConnectionSupervisor;
  dir: string;
  state: string;
  limits?: ReceiveLimits;
  /** Files larger than this are not synced (1 GiB by default). */
  maxFileBytes?: number;
  /** Whether permission bits sync (false: `--no-perms`). */
  perms?: boolean;
  /** How long a transfer runs before the progress line shows (3 s). */
  progressAfterMs?: number;
  /** How long a prefetch no notice touched is kept (5 minutes). */
  prefetchIdleMs?: number;
}

/** The folder sync of `runFolderSync` with what goes around it (`openSyncedFolder`). */
export type SyncedFolder = ReturnType<typeof openSyncedFolder>;

/**
 * The folder sync of `runFolderSync` with what goes around it: the lines it prints (a line
 * printed while the progress line shows takes its place; it is drawn again after), the file
 * transfers on the supervisor's current connection, the folder reports and the progress line.
 */
export function openSyncedFolder(options: SyncedFolderOptions, key: E2EKey | undefined) {
  const { io, supervisor, state } = options;
  let clearProgress: () => void = () => undefined;
  const out = (line: string) => {
    clearProgress();
    io.stdout.write(`${printable(line)}\n`);
  };
  const problem = (line: string) => {
    clearProgress();
    io.stderr.write(`${printable(line)}\n`);
  };
  const dir = usableFolder(options.dir);
  // Chunks the host dropped as damaged: this device puts back those its files hold, now.
  const transfers = connectionTransfers(supervisor, key, (ids) => void folder.chunksLost(ids));
  const folder = openFolder(() => {
    return new FolderSync({
      dir,
      stateFile: state,
      device: String(supervisor.connection.device),
      limits: options.limits,
      maxFileBytes: options.maxFileBytes,
      perms: options.perms,
      prefetchIdleMs: options.prefetchIdleMs,
      transfer: transfers.current,
      log: ({ kind, line }) => (kind === 'out' ? out(line) : problem(line)),
    });
  }, state);
  const reports = folderReports({
    connection: () => supervisor.connection,
    doc: docKeyOf(folderDocName, key),
    encrypted: key !== undefined,
    count: () => folder.liveFiles(),
  });
  const progress = showProgress(io, () => folder.transfers(), options.progressAfterMs);
  clearProgress = progress.clear;
  const stopNotices = listenNotices(supervisor, key, (from, notice) =>
    folder.prefetch(from, notice),
  );
  const stop = () => {
    stopNotices();
    progress.stop();
    reports.stop();
    transfers.close();
  };
  /** Which chunks the host holds, asked with this sync's own transfer. */
  const held = (ids: string[]) => {
    const transfer = transfers.current();
    if (transfer === undefined) {
      return Promise.reject(new SyncError('not_joined', 'the running sync is not connected now'));
    }
    return transfer.held(ids);
  };
  return { dir, folder, out, problem, files: { reports, stop, held } };
}

/** The folder's real path, made when missing; one clear line when it cannot be (a file in the way, no permission). */
function usableFolder(given: string): string {
  try {
    mkdirSync(given, { recursive: true });
    const dir = realpathSync(given);
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error(), { code: 'ENOTDIR' });
    return dir;
  } catch (err: unknown) {
    throw new SyncError('folder_unusable', `the folder ${given} cannot be used (${codeOf(err)})`);
  }
}

/** The folder sync on its state log; one clear line when the log cannot be read or written. */
function openFolder(open: () => FolderSync, state: string): FolderSync {
  try {
    return open();
  } catch (err: unknown) {
    throw new SyncError(
      'folder_unusable',
      `the state of this folder, ${state}, cannot be read or written (${codeOf(err)}); to start the folder afresh, stop sync and delete that file`,
    );
  }
}

function codeOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined) return code;
  return err instanceof Error ? err.message : String(err);
}
