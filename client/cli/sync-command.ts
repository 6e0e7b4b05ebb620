import { createHash } from 'node:crypto';
import { type FSWatcher, mkdirSync, realpathSync, watch } from 'node:fs';
import { join, resolve } from 'node:path';
import type { SyncError } from '../errors.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { createYjsProvider } from '../yjs-provider.ts';
import { type Context, expectArgs, UsageError } from './context.ts';
import { folderDocName } from './folder-doc.ts';
import { FolderSync } from './folder-sync.ts';
import { type CliIo, readSecret } from './io.ts';
import { printable } from './printable.ts';
import { openRoomOf, stopSignal } from './project-room.ts';
import type { ReceiveLimits } from './receive-budget.ts';

/** A rescan besides the watcher's events, for changes `fs.watch` did not report. */
const rescanMs = 2_000;
/** Quiet time after a folder event before the scan (editors write in several steps). */
const settleMs = 50;

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
  connection: RelayConnection;
  dir: string;
  state: string;
  passphrase: string | undefined;
  stopped: Promise<unknown>;
  limits?: ReceiveLimits;
}): Promise<number> {
  const { io, connection, state, passphrase } = options;
  const out = (line: string) => io.stdout.write(`${printable(line)}\n`);
  const problem = (line: string) => io.stderr.write(`${printable(line)}\n`);
  mkdirSync(options.dir, { recursive: true });
  const dir = realpathSync(options.dir);
  const folder = new FolderSync({
    dir,
    stateFile: state,
    device: String(connection.device),
    limits: options.limits,
    log: ({ kind, line }) => (kind === 'out' ? out(line) : problem(line)),
  });
  // What changed while sync was not running is read before anything from the room is applied.
  folder.guarded(() => folder.scan());
  const provider = await createYjsProvider({
    connection,
    doc: folder.shared,
    name: folderDocName,
    passphrase,
  });
  provider.on('error', (error) => problem(`problem: ${error.message}`));
  provider.on('peers', (peers) => out(`peers: ${peers.length === 0 ? 'none' : peers.join(', ')}`));
  provider.on('synced', (synced) => out(synced ? 'in sync' : 'offline; reconnecting'));

  const ended = new Promise<SyncError | undefined>((resolveEnd) => {
    connection.on('close', (info) => resolveEnd(info.error));
  });
  connection.connect().catch(() => {
    // The close event reports why.
  });
  const stopped = options.stopped.then(() => 'stopped' as const);
  out(`watching ${dir}`);

  let scanTimer: ReturnType<typeof setTimeout> | undefined;
  const scan = () => folder.guarded(() => folder.scan());
  const scanSoon = () => {
    clearTimeout(scanTimer);
    scanTimer = setTimeout(scan, settleMs);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, { recursive: true }, scanSoon);
    watcher.on('error', () => {
      // The rescan goes on.
    });
  } catch (err: unknown) {
    problem(
      `not watching ${dir} (${err instanceof Error ? err.message : String(err)}); rescanning every 2 s`,
    );
  }
  const rescan = setInterval(scan, rescanMs);
  try {
    const outcome = await Promise.race([stopped, ended]);
    if (outcome !== 'stopped' && outcome !== undefined) throw outcome;
    scan();
    await Promise.race([provider.flush(), new Promise((r) => setTimeout(r, 2_000))]);
    return 0;
  } finally {
    watcher?.close();
    clearInterval(rescan);
    clearTimeout(scanTimer);
    folder.close();
    provider.destroy();
    if (connection.state !== 'closed') await connection.close({ leave: false });
  }
}

/** `sync <projectKey> <dir> [--encrypt]`: the passphrase from stdin, then runFolderSync. */
export async function syncFolder(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  let passphrase: string | undefined;
  if (ctx.flags.encrypt) {
    passphrase = await readSecret(
      ctx.io,
      'Encryption passphrase (the same on every device, not shown): ',
    );
    if (passphrase === undefined) throw new UsageError('--encrypt needs a passphrase on stdin');
  }
  const { connection, authUrl } = await openRoomOf(ctx, projectKey);
  return runFolderSync({
    io: ctx.io,
    connection,
    dir,
    state: statePath(ctx.store.dir, authUrl, projectKey, dir),
    passphrase,
    stopped: stopSignal(),
  });
}
