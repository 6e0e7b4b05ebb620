import { createHash } from 'node:crypto';
import { type FSWatcher, mkdirSync, realpathSync, statSync, watch } from 'node:fs';
import { join, resolve } from 'node:path';
import type { AuthClient } from '../auth-client.ts';
import type { Project } from '../auth-types.ts';
import { docKeyOf } from '../doc-key.ts';
import { deriveE2EKey, type E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import { listenNotices } from '../folder/blob-notices.ts';
import { folderDocName } from '../folder/document.ts';
import { FolderSync } from '../folder/folder-sync.ts';
import type { ReceiveLimits } from '../folder/receive-budget.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { cursorAfter, fetchHistory, type HistoryEntry } from '../yjs-history.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';
import { connectionTransfers } from './connection-transfers.ts';
import { type Context, expectArgs, signedIn, UsageError } from './context.ts';
import type { ControlRequest } from './control-protocol.ts';
import type { ControlHandlers } from './control-socket.ts';
import { historyOutput, type Output, putBack, restoreOutput } from './folder-history.ts';
import type { CliIo } from './io.ts';
import { passphraseSource } from './passphrase.ts';
import { checkPassphrase, type PassphraseVerdict } from './passphrase-check.ts';
import { printable } from './printable.ts';
import {
  type DeviceOwner,
  localName,
  projectDevices,
  qualifiedName,
  roomOf,
  stopSignal,
} from './project-room.ts';
import { superviseYjsProvider } from './supervised-provider.ts';
import { folderReports, progressAfterMsFrom, showProgress } from './sync-progress.ts';
import { reconnectDelaysFrom, startSyncSession } from './sync-session.ts';

/** Bounds of the time between two full scans (besides the watcher's events). */
const minFullScanMs = 2_000;
const maxFullScanMs = 60_000;
/** Quiet time after a folder event before the scan (editors write in several steps). */
const settleMs = 50;
/**
 * How long a stop waits for the host to take what was read last: with the close after it, the
 * process is gone within 2 s of SIGINT/SIGTERM.
 */
const stopFlushMs = 1_500;
/** How long a stop takes at most, the wait for the host and the close of the connection. */
const stopWithinMs = 1_900;
/** How often `in sync` waits for the files still being received to be written. */
const inSyncCheckMs = 250;
/** How long the host's history may take on a first run. */
const historyTimeoutMs = 30_000;

/** The local state log of one folder and project, in the credentials' folder. */
export function statePath(configDir: string, authUrl: string, projectKey: string, dir: string) {
  const id = createHash('sha256')
    .update(`${authUrl}\n${projectKey}\n${resolve(dir)}`)
    .digest('hex');
  return join(configDir, 'sync-state', `${id.slice(0, 24)}.log`);
}

/**
 * `sync-host sync`: keeps `dir` in step with the project's other devices until `stopped`
 * resolves (then saves the state and leaves without `leave`, so the relay buffers meanwhile).
 * Progress on stdout, one line per file and per change of peers; problems on stderr; every name
 * that came from elsewhere is escaped.
 */
export async function runFolderSync(options: {
  io: CliIo;
  /** The room's connections (a fresh one after a final close); started here. */
  supervisor: ConnectionSupervisor;
  dir: string;
  state: string;
  passphrase: string | undefined;
  stopped: Promise<unknown>;
  limits?: ReceiveLimits;
  /** Files larger than this are not synced (1 GiB by default). */
  maxFileBytes?: number;
  /** Whether permission bits sync (false: `--no-perms`). */
  perms?: boolean;
  /** How long a transfer runs before the progress line shows (3 s). */
  progressAfterMs?: number;
  /** How long a prefetch no notice touched is kept (5 minutes). */
  prefetchIdleMs?: number;
  /** Adds fields to what the control socket's `status` answers (the folder's counts). */
  addStatus?: (fields: () => Record<string, unknown>) => void;
  /** Answers `history` and `restore` on the control socket with this sync's connection. */
  serveFolder?: (handler: NonNullable<ControlHandlers['folder']>) => void;
  /** The project's key, as `history` names it. */
  projectKey?: string;
  /** The host's history of the folder document, fetched on a first run with files here. */
  history?: (key: E2EKey | undefined) => Promise<{ entries: HistoryEntry[]; last: number }>;
  /** What the host says of this device's passphrase (passphrase-check.ts), asked first. */
  checkPassphrase?: (key: E2EKey) => Promise<PassphraseVerdict>;
  /** Who the devices of the project are (their users' e-mail and role), for `status`. */
  who?: DeviceDirectory;
}): Promise<number> {
  const { supervisor, passphrase } = options;
  const key =
    passphrase === undefined
      ? undefined
      : await deriveE2EKey(passphrase, supervisor.connection.room);
  // Before anything is read, written or sent: a device with another passphrase than the
  // project's would send its files under a key the others cannot open, and write nothing of theirs.
  if (key !== undefined && (await options.checkPassphrase?.(key)) === 'other') {
    throw new SyncError(
      'wrong_passphrase',
      `this device's passphrase is not the one this project's other devices use (the host holds what they wrote under another); nothing was read, sent or written. Start sync again with their passphrase (or, to change the project's passphrase, with --new-passphrase)`,
    );
  }
  const { dir, folder, out, problem, files } = openSyncedFolder(options, key);
  // A first run with files here: the host's history first, so that a file copied from an
  // earlier version of another device's text merges with it (client/folder/ancestors.ts).
  const history = folder.firstRunWithFiles ? await historyFor(options, key, problem) : undefined;
  if (history !== undefined) folder.startFrom(history.entries.map((entry) => entry.update));
  // What changed while sync was not running is read before anything from the room is applied.
  folder.guarded(() => folder.scan());
  const provider = await superviseYjsProvider({
    supervisor,
    doc: folder.shared,
    name: folderDocName,
    key,
    store:
      history === undefined
        ? folder.storeProgress
        : cursorAfter(history.entries, history.last, docKeyOf(folderDocName, key)).progress(),
  });
  provider.on('error', (error) => problem(`problem: ${error.message}`));
  provider.on('peers', (peers) => {
    out(`peers: ${peers.length === 0 ? 'none' : peers.join(', ')}`);
    options.who?.seen(peers);
  });
  // What `sync-host status` shows: files sent and not yet confirmed by the relay drop out once
  // a flush after them is confirmed (after each read, and when the connection is back).
  let lastInSync: string | null = null;
  const confirmSent = () => {
    const mark = folder.unconfirmed.mark();
    if (mark === undefined) return;
    // a viewer's device sends nothing: what changed here stays listed as not sent
    if (supervisor.connection.readOnly) {
      files.reports.changed();
      return;
    }
    provider.flush().then(
      () => folder.unconfirmed.confirmed(mark),
      () => undefined, // the connection ended: confirmed after the next one synced
    );
    files.reports.changed();
  };
  folder.onChange = confirmSent;
  let inSync = false;
  // `in sync` comes after the files the catch-up brought are written (their `received` lines),
  // those fetched as chunks included: it is looked at again every 250 ms while files wait to be
  // written and some are on their way (one that cannot be written, a link in the way or a
  // download that fails, is in `status`, not a reason to stay silent).
  let inSyncTimer: ReturnType<typeof setTimeout> | undefined;
  let waitingBefore = -1;
  const sayInSync = () => {
    inSyncTimer = undefined;
    if (!inSync) return;
    folder.guarded(() => folder.flushRemote());
    const waiting = folder.folderStatus().waitingDown.files;
    const moving = folder.transfers().some((transfer) => transfer.direction === 'down');
    if (waiting === 0 || (!moving && waiting === waitingBefore)) {
      waitingBefore = -1;
      out('in sync');
      return;
    }
    waitingBefore = waiting;
    inSyncTimer = setTimeout(sayInSync, inSyncCheckMs);
  };
  provider.on('synced', (synced) => {
    clearTimeout(inSyncTimer);
    if (!synced) out('offline; reconnecting');
    if (inSync && !synced) lastInSync = new Date().toISOString();
    inSync = synced;
    if (synced) {
      sayInSync();
      confirmSent();
      folder.resume();
      files.reports.changed();
    }
  });
  options.serveFolder?.((request) =>
    folderRequest(request, {
      supervisor,
      key,
      folder,
      provider,
      projectKey: options.projectKey,
      held: files.held,
    }),
  );
  options.addStatus?.(() => {
    const { blobsUp, ...fields } = folder.folderStatus();
    const sent = folder.unconfirmed.summary;
    return {
      inSync,
      lastInSync: inSync ? new Date().toISOString() : lastInSync,
      ...(options.who && { who: Object.fromEntries(options.who.known()) }),
      ...(supervisor.connection.readOnly
        ? { waitingUp: { files: 0, bytes: 0 }, viewer: true, notSent: folder.unconfirmed.paths() }
        : {
            waitingUp: { files: sent.files + blobsUp.files, bytes: sent.bytes + blobsUp.bytes },
          }),
      ...fields,
    };
  });

  const ended = supervisor.ended;
  supervisor.start();
  confirmSent();
  let stoppedAt: number | undefined;
  const stopped = options.stopped.then(() => {
    stoppedAt = performance.now();
    return 'stopped' as const;
  });
  out(`watching ${dir}`);

  // The watcher's events read what they name; a full scan besides, for what it missed, at most
  // 1 % of the time (every 2 s for a small folder, less often for a large one, at least every
  // minute).
  let scanTimer: ReturnType<typeof setTimeout> | undefined;
  let fullScanTimer: ReturnType<typeof setTimeout> | undefined;
  const scanSoon = (_event: string, name: string | Buffer | null) => {
    folder.notice(typeof name === 'string' ? name : null);
    clearTimeout(scanTimer);
    scanTimer = setTimeout(() => {
      folder.guarded(() => folder.scanNoticed());
      confirmSent();
    }, settleMs);
  };
  const fullScan = () => {
    folder.guarded(() => folder.scan());
    confirmSent();
    const every = Math.min(maxFullScanMs, Math.max(minFullScanMs, 100 * folder.lastFullScanMs));
    fullScanTimer = setTimeout(fullScan, every);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, { recursive: true }, scanSoon);
    watcher.on('error', () => {
      // The full scans go on.
    });
  } catch (err: unknown) {
    problem(
      `not watching ${dir} (${err instanceof Error ? err.message : String(err)}); rescanning the whole folder regularly`,
    );
  }
  fullScanTimer = setTimeout(fullScan, minFullScanMs);
  try {
    const outcome = await Promise.race([stopped, ended]);
    if (outcome !== 'stopped' && outcome !== undefined) throw outcome;
    folder.guarded(() => folder.scan());
    // Up to 1.5 s for the relay and the host to take what was read last; a connection that
    // ends meanwhile leaves it to the next start (the host summary says what the host lacks).
    // The timer is cleared: one left running would hold the process that long after the stop.
    let flushTimer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      provider.flush().catch(() => undefined),
      new Promise((resolve) => {
        flushTimer = setTimeout(resolve, stopFlushMs);
      }),
    ]);
    clearTimeout(flushTimer);
    return 0;
  } finally {
    watcher?.close();
    clearTimeout(inSyncTimer);
    clearTimeout(fullScanTimer);
    clearTimeout(scanTimer);
    files.stop();
    folder.close(provider.store.progress());
    provider.destroy();
    // What is left of the 2 s a stop takes at most, for the close of the connection.
    const spentMs = stoppedAt === undefined ? 0 : performance.now() - stoppedAt;
    await supervisor.stop({ cutAfterMs: Math.max(100, stopWithinMs - spentMs) });
  }
}

/**
 * `history` or `restore` asked of this sync through its control socket: the host's history of
 * the folder read on this sync's connection (the device's one in the room); a restore is an
 * edit of the folder here, written here and sent like any other.
 */
async function folderRequest(
  request: Extract<ControlRequest, { op: 'history' | 'restore' }>,
  running: {
    supervisor: ConnectionSupervisor;
    key: E2EKey | undefined;
    folder: FolderSync;
    provider: { flush(): Promise<void> };
    projectKey: string | undefined;
    held: (ids: string[]) => Promise<Set<string>>;
  },
): Promise<Output> {
  const { supervisor, key, folder, provider, held } = running;
  const projectKey = running.projectKey ?? 'this project';
  if (supervisor.state !== 'joined') {
    throw new SyncError(
      'not_joined',
      'the running sync is not connected to the host now; try again once it is',
    );
  }
  const connection = supervisor.connection;
  const kept = { connection, key, held, ...(await fetchHistory(connection, folderDocName, key)) };
  if (request.op === 'history') return historyOutput(kept, projectKey, request.path);
  return restoreOutput(kept, projectKey, request.path, request.at, async (contents) => {
    const device = String(connection.device);
    const changed = contents.filter(([path, content]) =>
      putBack(folder.shared, path, content, device),
    );
    if (changed.length > 0) await provider.flush();
    return changed.map(([path]) => path);
  });
}

/** The host's history for a first run; a line and none when it cannot be had. */
async function historyFor(
  options: Parameters<typeof runFolderSync>[0],
  key: E2EKey | undefined,
  problem: (line: string) => void,
): Promise<{ entries: HistoryEntry[]; last: number } | undefined> {
  if (options.history === undefined) return undefined;
  try {
    return await options.history(key);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    problem(
      `no history from the host (${why}): a file here that differs from another device's is kept as a conflict copy`,
    );
    return undefined;
  }
}

/**
 * Every entry the host keeps of the folder document, on a connection of its own (closed before
 * sync's own joins), within 30 s.
 */
async function hostHistory(
  open: () => RelayConnection,
  key: E2EKey | undefined,
): Promise<{ entries: HistoryEntry[]; last: number }> {
  const connection = open();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 30 s')), historyTimeoutMs);
  });
  try {
    await Promise.race([connection.connect(), late]);
    return await Promise.race([fetchHistory(connection, folderDocName, key), late]);
  } finally {
    clearTimeout(timer);
    if (connection.state !== 'closed') await connection.close();
  }
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

/**
 * `sync <projectKey> <dir> [--encrypt [--passphrase-file F]]`: refuses when a sync of the
 * project runs already for this device, else serves its control socket and runs runFolderSync.
 */
export async function syncFolder(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  const passphrase = passphraseSource(ctx);
  const maxFileBytes = maxFileBytesOf(ctx.flags['max-file-bytes']);
  const { open, authUrl, project, auth } = await roomOf(ctx, projectKey);
  // one name for the folder's local files, whichever name of the project was typed
  const local = localName(project);
  const session = await startSyncSession({
    configDir: ctx.store.dir,
    authUrl,
    projectKey: local,
    folder: dir,
    open,
    onLine: (line) => ctx.io.stderr.write(`${printable(line)}\n`),
    delays: reconnectDelaysFrom(ctx.env),
  });
  try {
    return await runFolderSync({
      io: ctx.io,
      supervisor: session.supervisor,
      dir,
      state: statePath(ctx.store.dir, authUrl, local, dir),
      passphrase: await passphrase(),
      maxFileBytes,
      perms: ctx.flags['no-perms'] !== true,
      progressAfterMs: progressAfterMsFrom(ctx.env),
      prefetchIdleMs: prefetchIdleMsFrom(ctx.env),
      stopped: stopSignal(),
      addStatus: session.addStatus,
      serveFolder: session.serveFolder,
      projectKey,
      history: (key) => hostHistory(open, key),
      checkPassphrase: (key) => checkPassphrase(open, key, ctx.flags['new-passphrase'] === true),
      who: devicesOf(auth, project.id),
    });
  } catch (err: unknown) {
    throw await membershipEnded(ctx, project, dir, err);
  } finally {
    await session.close();
  }
}

/** Who the devices of a project are, looked up again when a device not known yet shows. */
export interface DeviceDirectory {
  known(): ReadonlyMap<string, DeviceOwner>;
  seen(devices: readonly string[]): void;
}

/** The devices of project `projectId` at the auth service, asked at start and for new devices. */
function devicesOf(auth: AuthClient, projectId: number): DeviceDirectory {
  let known: ReadonlyMap<string, DeviceOwner> = new Map();
  let asking = false;
  const ask = () => {
    if (asking) return;
    asking = true;
    void projectDevices(auth, projectId)
      .then((found) => {
        if (found.size > 0) known = found;
      })
      .finally(() => {
        asking = false;
      });
  };
  ask();
  return {
    known: () => known,
    seen(devices) {
      if (devices.some((device) => !known.has(device))) ask();
    },
  };
}

/**
 * A shared project's sync refused by the relay (`revoked`, `auth_failed`): when the project is
 * no longer shared with this user (removed, left, or deleted by its owner), one line that says
 * so instead of the relay's; any other error as it was.
 */
async function membershipEnded(
  ctx: Context,
  project: Project,
  dir: string,
  err: unknown,
): Promise<unknown> {
  const refused =
    err instanceof SyncError && (err.code === 'revoked' || err.code === 'auth_failed');
  if (!refused || project.role === undefined || project.role === 'owner') return err;
  const listed = await (await signedIn(ctx)).auth.projects().catch(() => undefined);
  if (listed === undefined || listed.some((p) => p.id === project.id)) return err;
  return new SyncError(
    'not_found',
    `"${qualifiedName(project)}" is no longer shared with you (you were removed, or its owner deleted it): sync stopped; the files stay in ${dir}`,
  );
}

/**
 * Test-only: how long a prefetch no notice touched is kept, in ms (not documented for users:
 * 5 minutes).
 */
export const prefetchIdleVariable = 'SYNC_HOST_TEST_PREFETCH_IDLE_MS';

function prefetchIdleMsFrom(env: NodeJS.ProcessEnv): number | undefined {
  const ms = Number(env[prefetchIdleVariable]);
  return env[prefetchIdleVariable] && Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/** `--max-file-bytes N`: a whole number of bytes, at least 1 (1 GiB when absent). */
function maxFileBytesOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const bytes = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(bytes) || bytes < 1) {
    throw new UsageError('--max-file-bytes takes a whole number of bytes, such as 1073741824');
  }
  return bytes;
}

/**
 * The folder sync of `runFolderSync` with what goes around it: the lines it prints (a line
 * printed while the progress line shows takes its place; it is drawn again after), the file
 * transfers on the supervisor's current connection, the folder reports and the progress line.
 */
function openSyncedFolder(options: Parameters<typeof runFolderSync>[0], key: E2EKey | undefined) {
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
