import * as Y from 'yjs';
import { ChunkTransfer } from '../chunks/index.ts';
import { docKeyOf } from '../doc-key.ts';
import { deriveE2EKey, type E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import {
  addEntry,
  addVersion,
  type BlobVersion,
  entryDigest,
  entryLive,
  entryOf,
  type FileEntry,
  folderDocName,
  newVersion,
} from '../folder/document.ts';
import { editText } from '../folder/text-merge.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { cursorAfter, documentAt, fetchHistory, type HistoryEntry } from '../yjs-history.ts';
import { YjsProvider } from '../yjs-provider.ts';
import { type Context, signedIn, UsageError } from './context.ts';
import { requestControl } from './control-client.ts';
import { controlSocketPath } from './control-path.ts';
import { passphraseSource } from './passphrase.ts';
import { printable } from './printable.ts';
import { findProject, localNameOf, projectDevices, roomOf } from './project-room.ts';

/** How long joining and the catch-up may take. */
const timeoutMs = 30_000;

/** What the host keeps of a project's folder document, opened on a joined connection. */
interface FolderHistory {
  connection: RelayConnection;
  key: E2EKey | undefined;
  entries: HistoryEntry[];
  last: number;
  skipped: number;
}

/**
 * Joins the project's room as this device, reads every entry the host keeps of the folder
 * document, runs `use`, and leaves. Refused while a `sync` of the project runs with these
 * credentials (the relay keeps one connection per device and room): stop it first.
 */
async function withFolderHistory<T>(
  ctx: Context,
  projectKey: string,
  use: (history: FolderHistory) => Promise<T>,
): Promise<T> {
  const passphrase = passphraseSource(ctx);
  const { authUrl } = await signedIn(ctx);
  const running = await requestControl(
    controlSocketPath(ctx.store.dir, authUrl, await localNameOf(ctx, projectKey)),
    { op: 'status' },
    5_000,
    'the running sync did not answer',
  );
  if (running !== undefined) {
    throw new SyncError(
      'sync_running',
      `a sync of ${projectKey} runs on this device: stop it first (its connection is the one this device has in the room)`,
    );
  }
  const { open } = await roomOf(ctx, projectKey);
  const connection = open();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new SyncError('timeout', `no answer from the host within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([connection.connect(), late]);
    const typed = await passphrase();
    const key = typed === undefined ? undefined : await deriveE2EKey(typed, connection.room);
    const kept = await Promise.race([fetchHistory(connection, folderDocName, key), late]);
    return await Promise.race([use({ connection, key, ...kept }), late]);
  } finally {
    clearTimeout(timer);
    if (connection.state !== 'closed') await connection.close();
  }
}

/** Each path's state in a folder document: the digests of its live versions, or deleted. */
function pathStates(doc: Y.Doc): Map<string, string> {
  const byPath = new Map<string, FileEntry[]>();
  for (const [id, value] of doc.getMap<unknown>('files')) {
    const entry = entryOf(id, value);
    if (typeof entry === 'string') continue;
    byPath.set(entry.path, [...(byPath.get(entry.path) ?? []), entry]);
  }
  const states = new Map<string, string>();
  for (const [path, entries] of byPath) {
    const live = entries.filter(entryLive);
    states.set(path, live.length === 0 ? 'deleted' : live.map(entryDigest).sort().join(','));
  }
  return states;
}

/** One line per change of a file (of `path` only, when given), oldest first. */
function changeLines(
  entries: HistoryEntry[],
  path: string | undefined,
  names: ReadonlyMap<string, string>,
): string[] {
  const lines: string[] = [];
  let before = new Map<string, string>();
  const doc = new Y.Doc();
  for (const entry of entries) {
    Y.applyUpdate(doc, entry.update);
    const after = pathStates(doc);
    for (const [name, state] of after) {
      if (path !== undefined && name !== path) continue;
      const was = before.get(name);
      if (was === state) continue;
      const change =
        state === 'deleted'
          ? 'deleted'
          : was === undefined
            ? 'created'
            : was === 'deleted'
              ? 'restored'
              : 'changed';
      const who = names.get(entry.from);
      const by = who === undefined ? `device ${entry.from}` : `device ${entry.from} (${who})`;
      lines.push(`${new Date(entry.at).toISOString()}  ${by}  ${change}  ${name}`);
    }
    before = after;
  }
  return lines;
}

/** Who each device of the project is, `<e-mail>, <device name>` by device id. */
async function deviceNames(ctx: Context, projectKey: string): Promise<Map<string, string>> {
  const { auth } = await signedIn(ctx);
  const project = await findProject(auth, projectKey);
  const names = new Map<string, string>();
  for (const [id, who] of await projectDevices(auth, project.id)) {
    names.set(id, `${who.email}, ${who.deviceName}`);
  }
  return names;
}

/** `history <projectKey> [path] [--encrypt [--passphrase-file F]]`: when each file changed. */
export async function history(ctx: Context): Promise<number> {
  if (ctx.args.length < 1) throw new UsageError('missing arguments: expected <projectKey> [path]');
  if (ctx.args.length > 2) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  const [projectKey, path] = ctx.args as [string, string | undefined];
  const names = await deviceNames(ctx, projectKey);
  return withFolderHistory(ctx, projectKey, async ({ entries, skipped }) => {
    for (const line of changeLines(entries, path, names)) {
      ctx.io.stdout.write(`${printable(line)}\n`);
    }
    if (entries.length === 0 && skipped === 0) {
      // A passphrase names the document too: another one (or none) finds nothing kept.
      ctx.io.stderr.write(
        `the host keeps nothing of ${printable(projectKey)}'s folder under this name (for an encrypted project: --encrypt with its passphrase)\n`,
      );
    }
    if (skipped > 0) {
      ctx.io.stderr.write(
        `${skipped} entries kept by the host could not be opened (another passphrase, or none) and were left out\n`,
      );
    }
    return 0;
  });
}

/** What a file held at a moment of the history: its text, or its version kept as chunks. */
type Content = { text: string } | { blob: BlobVersion };

/** The newest of `entries` (of one path), the live ones first. */
function newestLive(entries: FileEntry[]): FileEntry | undefined {
  const newest = (list: FileEntry[]) => list.sort((a, b) => b.time - a.time)[0];
  return newest(entries.filter(entryLive));
}

/** The entries of `doc`'s folder at `path`, deleted ones too. */
function entriesAt(doc: Y.Doc, path: string): FileEntry[] {
  const found: FileEntry[] = [];
  for (const [id, value] of doc.getMap<unknown>('files')) {
    const entry = entryOf(id, value);
    if (typeof entry !== 'string' && entry.path === path) found.push(entry);
  }
  return found;
}

/** What `path` held at `at` in the history: its live version, else the last before a delete. */
function contentAt(
  entries: HistoryEntry[],
  path: string,
  at: number | undefined,
): Content | undefined {
  const candidates = entriesAt(documentAt(entries, at), path);
  const chosen =
    newestLive(candidates) ?? candidates.sort((a, b) => b.time - a.time)[0] ?? undefined;
  if (chosen === undefined) return undefined;
  return chosen.text === undefined ? { blob: chosen.blob! } : { text: chosen.text.toString() };
}

/**
 * Refuses (changing nothing) a version kept as chunks of which the host no longer holds some:
 * the sweep dropped them, no device having asked about them for the whole history. Asking
 * marks the held ones used, so they stay while the restored version is fetched.
 */
async function checkHeld(history: FolderHistory, version: BlobVersion, what: string) {
  const transfer = new ChunkTransfer({ connection: history.connection, key: history.key });
  try {
    const ids = [...new Set(version.chunks.map(([id]) => id))];
    const held = await transfer.held(ids);
    const gone = ids.filter((id) => !held.has(id)).length;
    if (gone > 0) {
      throw new SyncError(
        'chunk_missing',
        `${what} cannot be restored: the host no longer holds ${gone} of its ${ids.length} chunks (nothing was changed)`,
      );
    }
  } finally {
    transfer.close();
  }
}

/**
 * Makes `content` the file at `path` of the folder document (one transaction), as an edit of
 * this device: a text merged into the live text entry, a blob version replacing the live blob's
 * current one (so a device that changed it meanwhile meets the usual conflict rule), else the
 * live entry of the other kind deleted and a new entry made. False when it is so already.
 */
function putBack(doc: Y.Doc, path: string, content: Content, device: string): boolean {
  const current = newestLive(entriesAt(doc, path));
  const same =
    'text' in content
      ? current?.text?.toString() === content.text
      : current?.blob?.digest === content.blob.digest;
  if (current !== undefined && same) return false;
  const time = Date.now();
  doc.transact(() => {
    if ('text' in content && current?.text !== undefined) {
      editText(current.text, content.text);
      return;
    }
    const fresh = 'blob' in content ? newVersion(content.blob, device, time) : content.text;
    if (typeof fresh !== 'string' && current?.blob !== undefined) {
      addVersion(current, fresh, true);
      return;
    }
    if (current !== undefined) current.map.set('deleted', entryDigest(current));
    addEntry(doc.getMap<unknown>('files'), { path, content: fresh, device, time });
  });
  return true;
}

/**
 * `restore <projectKey> <path> [--at <ISO time>] [--encrypt [--passphrase-file F]]`: brings the
 * file back as it was then (now by default: a deleted file as it was when deleted), as a new
 * edit that the host stores and every device receives. A file kept as chunks comes back as a
 * new version naming the same chunks, once the host says it still holds every one of them.
 */
export async function restore(ctx: Context): Promise<number> {
  if (ctx.args.length < 2) throw new UsageError('missing arguments: expected <projectKey> <path>');
  if (ctx.args.length > 2) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  const [projectKey, path] = ctx.args as [string, string];
  const atFlag = ctx.flags.at;
  const at = atFlag === undefined ? undefined : Date.parse(atFlag);
  if (at !== undefined && !Number.isFinite(at)) {
    throw new UsageError('--at takes a time such as 2026-11-26T16:40:00Z');
  }
  const when = at === undefined ? 'its last version' : new Date(at).toISOString();
  return withFolderHistory(ctx, projectKey, async (history) => {
    const { connection, key, entries, last } = history;
    const content = contentAt(entries, path, at);
    if (content === undefined) {
      const then = at === undefined ? '' : ` at ${when}`;
      throw new SyncError(
        'not_found',
        `${path} is not in what the host keeps of ${projectKey}${then}`,
      );
    }
    if ('blob' in content) await checkHeld(history, content.blob, `${path} as of ${when}`);
    const doc = documentAt(entries);
    const store = cursorAfter(entries, last, docKeyOf(folderDocName, key));
    const provider = new YjsProvider({ connection, doc, name: folderDocName, store }, key);
    try {
      await provider.whenSynced();
      if (!putBack(doc, path, content, String(connection.device))) {
        ctx.io.stdout.write(`${printable(path)} is already as it was\n`);
        return 0;
      }
      await provider.flush();
      ctx.io.stdout.write(`restored ${printable(path)} as of ${when}\n`);
      return 0;
    } finally {
      provider.destroy();
    }
  });
}
