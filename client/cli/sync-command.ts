import { createHash } from 'node:crypto';
import { type FSWatcher, mkdirSync, readFileSync, renameSync, watch, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as Y from 'yjs';
import { fromBase64, toBase64 } from '../base64.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';
import { type Context, expectArgs } from './context.ts';
import { type Base, FolderSync } from './folder-sync.ts';
import type { CliIo } from './io.ts';
import { passphraseSource } from './passphrase.ts';
import { roomOf, stopSignal } from './project-room.ts';
import { superviseYjsProvider } from './supervised-provider.ts';
import { reconnectDelaysFrom, startSyncSession } from './sync-session.ts';

/** A rescan besides the watcher's events, for changes `fs.watch` did not report. */
const rescanMs = 2_000;
/** Quiet time after a folder event before the scan (editors write in several steps). */
const settleMs = 50;
const saveDelayMs = 300;

interface SavedState {
  version: 1;
  update: string;
  base: Base;
}

/** The local state file of one folder and project, in the credentials' folder. */
export function statePath(configDir: string, authUrl: string, projectKey: string, dir: string) {
  const id = createHash('sha256')
    .update(`${authUrl}\n${projectKey}\n${resolve(dir)}`)
    .digest('hex');
  return join(configDir, 'sync-state', `${id.slice(0, 24)}.json`);
}

function loadState(path: string, doc: Y.Doc): Base | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const saved = JSON.parse(text) as SavedState;
  const update = fromBase64(saved.update);
  if (saved.version !== 1 || update === undefined) return undefined;
  Y.applyUpdate(doc, update, 'state');
  return saved.base;
}

function saveState(path: string, doc: Y.Doc, base: Base): void {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  const state: SavedState = { version: 1, update: toBase64(Y.encodeStateAsUpdate(doc)), base };
  writeFileSync(`${path}.tmp`, JSON.stringify(state), { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
}

/**
 * `sync-host sync`: keeps `dir` in step with the project's other devices until `stopped`
 * resolves (then saves the state and leaves without `leave`, so the relay buffers meanwhile).
 * Progress on stdout, one line per file and per change of peers; problems on stderr.
 */
export async function runFolderSync(options: {
  io: CliIo;
  /** The room's connections (a fresh one after a final close); started here. */
  supervisor: ConnectionSupervisor;
  dir: string;
  state: string;
  passphrase: string | undefined;
  stopped: Promise<unknown>;
}): Promise<number> {
  const { io, supervisor, dir, state, passphrase } = options;
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const problem = (line: string) => io.stderr.write(`${line}\n`);
  mkdirSync(dir, { recursive: true });
  const doc = new Y.Doc();
  const saved = loadState(state, doc);
  const provider = await superviseYjsProvider({ supervisor, doc, name: 'folder', passphrase });
  const folder = new FolderSync(dir, doc, saved ?? {}, (line) =>
    line.startsWith('skipped') ? problem(line) : out(line),
  );
  provider.on('error', (error) => problem(`problem: ${error.message}`));
  provider.on('peers', (peers) => out(`peers: ${peers.length === 0 ? 'none' : peers.join(', ')}`));
  provider.on('synced', (synced) => out(synced ? 'in sync' : 'offline; reconnecting'));

  let saveTimer: ReturnType<typeof setTimeout> | undefined;
  const save = () => {
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => saveState(state, doc, folder.base), saveDelayMs);
  };
  doc.on('update', save);

  const ended = supervisor.ended;
  supervisor.start();
  const stopped = options.stopped.then(() => 'stopped' as const);
  // The first start waits for the room, so that files other devices have are known first (a
  // device whose passphrase the others refuse waits here, saying so, until it is stopped).
  if (saved === undefined) await Promise.race([provider.whenSynced(), ended, stopped]);
  folder.scan();
  out(`watching ${resolve(dir)}`);

  let scanTimer: ReturnType<typeof setTimeout> | undefined;
  const scanSoon = () => {
    clearTimeout(scanTimer);
    scanTimer = setTimeout(() => folder.scan(), settleMs);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, { recursive: true }, scanSoon);
  } catch (err: unknown) {
    problem(
      `not watching ${dir} (${err instanceof Error ? err.message : String(err)}); rescanning every 2 s`,
    );
  }
  const rescan = setInterval(() => folder.scan(), rescanMs);
  try {
    const outcome = await Promise.race([stopped, ended]);
    if (outcome !== 'stopped' && outcome !== undefined) throw outcome;
    folder.scan();
    await Promise.race([provider.flush(), new Promise((r) => setTimeout(r, 2_000))]);
    return 0;
  } finally {
    watcher?.close();
    clearInterval(rescan);
    clearTimeout(scanTimer);
    clearTimeout(saveTimer);
    saveState(state, doc, folder.base);
    provider.destroy();
    await supervisor.stop();
  }
}

/**
 * `sync <projectKey> <dir> [--encrypt [--passphrase-file F]]`: refuses when a sync of the
 * project runs already for this device, else serves its control socket and runs runFolderSync.
 */
export async function syncFolder(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  const passphrase = passphraseSource(ctx);
  const { open, authUrl } = await roomOf(ctx, projectKey);
  const session = await startSyncSession({
    configDir: ctx.store.dir,
    authUrl,
    projectKey,
    folder: dir,
    open,
    onLine: (line) => ctx.io.stderr.write(`${line}\n`),
    delays: reconnectDelaysFrom(ctx.env),
  });
  try {
    return await runFolderSync({
      io: ctx.io,
      supervisor: session.supervisor,
      dir,
      state: statePath(ctx.store.dir, authUrl, projectKey, dir),
      passphrase: await passphrase(),
      stopped: stopSignal(),
    });
  } finally {
    await session.close();
  }
}
