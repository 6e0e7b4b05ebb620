import { docKeyOf } from '../doc-key.ts';
import type { E2EKey } from '../e2e-key.ts';
import { folderDocName } from '../folder/document.ts';
import type { FolderSync } from '../folder/folder-sync.ts';
import { collectWhenIdle } from '../idle-collection.ts';
import { cursorAfter } from '../yjs-history.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';
import type { ControlHandlers } from './control-socket.ts';
import type { DeviceDirectory } from './device-directory.ts';
import { type HostHistory, historyFor } from './first-run-history.ts';
import { watchTree } from './folder-watcher.ts';
import { checkedKey, type PassphraseVerdict } from './passphrase-check.ts';
import { type SupervisedYjsProvider, superviseYjsProvider } from './supervised-provider.ts';
import { folderRequest, statusFields } from './sync-control.ts';
import { openSyncedFolder, type SyncedFolder, type SyncedFolderOptions } from './synced-folder.ts';

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

/** What `runFolderSync` keeps in step, and with what. */
export interface FolderSyncOptions extends SyncedFolderOptions {
  passphrase: string | undefined;
  stopped: Promise<unknown>;
  /** Adds fields to what the control socket's `status` answers (the folder's counts). */
  addStatus?: (fields: () => Record<string, unknown>) => void;
  /** Answers `history` and `restore` on the control socket with this sync's connection. */
  serveFolder?: (handler: NonNullable<ControlHandlers['folder']>) => void;
  /** The project's key, as `history` names it. */
  projectKey?: string;
  /** The host's history of the folder document, fetched on a first run with files here. */
  history?: (key: E2EKey | undefined) => Promise<HostHistory>;
  /** What the host says of this device's passphrase (passphrase-check.ts), asked first. */
  checkPassphrase?: (key: E2EKey) => Promise<PassphraseVerdict>;
  /** Who the devices of the project are (their users' e-mail and role), for `status`. */
  who?: DeviceDirectory;
}

/** The synced folder with its provider, as the parts of a running sync share it. */
type Running = SyncedFolder & {
  supervisor: ConnectionSupervisor;
  provider: SupervisedYjsProvider;
};

/**
 * `sync-host sync`: keeps `dir` in step with the project's other devices until `stopped`
 * resolves (then saves the state and leaves without `leave`, so the relay buffers meanwhile).
 * Progress on stdout, one line per file and per change of peers; problems on stderr; every name
 * that came from elsewhere is escaped.
 */
export async function runFolderSync(options: FolderSyncOptions): Promise<number> {
  const { supervisor } = options;
  const room = supervisor.connection.room;
  const key = await checkedKey(options.passphrase, room, options.checkPassphrase);
  const synced = openSyncedFolder(options, key);
  const { dir, folder, out, problem, files } = synced;
  // A first run with files here: the host's history first, so that a file copied from an
  // earlier version of another device's text merges with it (client/folder/ancestors.ts).
  const history = folder.firstRunWithFiles
    ? await historyFor(options.history, key, problem)
    : undefined;
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
  const running: Running = { ...synced, supervisor, provider };
  const step = followSync(running, options.who);
  const projectKey = options.projectKey;
  options.serveFolder?.((request) =>
    folderRequest(request, { supervisor, key, folder, provider, projectKey, held: files.held }),
  );
  options.addStatus?.(() => statusFields(running, step.state(), options.who));

  const ended = supervisor.ended;
  supervisor.start();
  step.confirmSent();
  let stoppedAt: number | undefined;
  const stopped = options.stopped.then(() => {
    stoppedAt = performance.now();
    return 'stopped' as const;
  });
  out(`watching ${dir}`);
  const watching = watchFolder(dir, folder, step.confirmSent, problem);
  // An idle device gives back the garbage of a large transfer instead of holding it for hours.
  const collecting = collectWhenIdle();
  try {
    const outcome = await Promise.race([stopped, ended]);
    if (outcome !== 'stopped' && outcome !== undefined) throw outcome;
    folder.guarded(() => folder.scan());
    await flushWithin(provider, stopFlushMs);
    return 0;
  } finally {
    collecting.stop();
    watching.close();
    step.close();
    files.stop();
    folder.close(provider.store.progress());
    provider.destroy();
    // What is left of the 2 s a stop takes at most, for the close of the connection.
    const spentMs = stoppedAt === undefined ? 0 : performance.now() - stoppedAt;
    await supervisor.stop({ cutAfterMs: Math.max(100, stopWithinMs - spentMs) });
  }
}

/**
 * The provider's lines (problems, peers, offline, `in sync`) and what `sync-host status` shows:
 * files sent and not yet confirmed by the relay drop out once a flush after them is confirmed
 * (after each read, and when the connection is back).
 */
function followSync(running: Running, who: DeviceDirectory | undefined) {
  const { supervisor, provider, folder, files, out, problem } = running;
  provider.on('error', (error) => problem(`problem: ${error.message}`));
  provider.on('peers', (peers) => {
    out(`peers: ${peers.length === 0 ? 'none' : peers.join(', ')}`);
    who?.seen(peers);
  });
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
  const inSyncLine = sayInSync(running, () => inSync);
  provider.on('synced', (synced) => {
    inSyncLine.cancel();
    if (!synced) out('offline; reconnecting');
    if (inSync && !synced) lastInSync = new Date().toISOString();
    inSync = synced;
    if (synced) {
      inSyncLine.say();
      confirmSent();
      folder.resume();
      files.reports.changed();
    }
  });
  return {
    confirmSent,
    state: () => ({ inSync, lastInSync }),
    close: () => inSyncLine.cancel(),
  };
}

/**
 * `in sync` comes after the files the catch-up brought are written (their `received` lines),
 * those fetched as chunks included: it is looked at again every 250 ms while files wait to be
 * written and some are on their way (one that cannot be written, a link in the way or a
 * download that fails, is in `status`, not a reason to stay silent).
 */
function sayInSync(running: Running, inSync: () => boolean) {
  const { folder, out } = running;
  let inSyncTimer: ReturnType<typeof setTimeout> | undefined;
  let waitingBefore = -1;
  const say = () => {
    inSyncTimer = undefined;
    if (!inSync()) return;
    folder.guarded(() => folder.flushRemote());
    const waiting = folder.folderStatus().waitingDown.files;
    const moving = folder.transfers().some((transfer) => transfer.direction === 'down');
    if (waiting === 0 || (!moving && waiting === waitingBefore)) {
      waitingBefore = -1;
      out('in sync');
      return;
    }
    waitingBefore = waiting;
    inSyncTimer = setTimeout(say, inSyncCheckMs);
  };
  return { say, cancel: () => clearTimeout(inSyncTimer) };
}

/**
 * The watcher's events read what they name; a full scan besides, for what it missed, at most
 * 1 % of the time (every 2 s for a small folder, less often for a large one, at least every
 * minute).
 */
function watchFolder(
  dir: string,
  folder: FolderSync,
  confirmSent: () => void,
  problem: (line: string) => void,
): { close(): void } {
  let scanTimer: ReturnType<typeof setTimeout> | undefined;
  let fullScanTimer: ReturnType<typeof setTimeout> | undefined;
  const scanSoon = (name: string | null) => {
    folder.notice(name);
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
  let watcher: { close(): void } | undefined;
  const notWatching = (err: unknown) =>
    problem(
      `not watching ${dir} (${err instanceof Error ? err.message : String(err)}); rescanning the whole folder regularly`,
    );
  try {
    watcher = watchTree(dir, scanSoon, notWatching);
  } catch (err: unknown) {
    notWatching(err);
  }
  fullScanTimer = setTimeout(fullScan, minFullScanMs);
  return {
    close() {
      watcher?.close();
      clearTimeout(fullScanTimer);
      clearTimeout(scanTimer);
    },
  };
}

/**
 * Up to `withinMs` for the relay and the host to take what was read last; a connection that
 * ends meanwhile leaves it to the next start (the host summary says what the host lacks). The
 * timer is cleared: one left running would hold the process that long after the stop.
 */
async function flushWithin(provider: { flush(): Promise<void> }, withinMs: number): Promise<void> {
  let flushTimer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    provider.flush().catch(() => undefined),
    new Promise((resolve) => {
      flushTimer = setTimeout(resolve, withinMs);
    }),
  ]);
  clearTimeout(flushTimer);
}
