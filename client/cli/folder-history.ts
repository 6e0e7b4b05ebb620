import type * as Y from 'yjs';
import { ChunkTransfer } from '../chunks/index.ts';
import type { E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import {
  addEntry,
  addVersion,
  type BlobVersion,
  entryDigest,
  entryLive,
  entryOf,
  type FileEntry,
  newVersion,
  setTextMeta,
} from '../folder/document.ts';
import { editText } from '../folder/text-merge.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { documentAt, type HistoryEntry } from '../yjs-history.ts';
import { changeLines } from './history-lines.ts';
import { printable } from './printable.ts';

/**
 * What `history` and `restore` do with what the host keeps of a project's folder document,
 * wherever they run: in the command itself (joined as this device), or in the running `sync` of
 * the project, asked through its control socket (its connection is the device's in the room).
 */

/** What the host keeps of a project's folder document, opened on a joined connection. */
export interface FolderHistory {
  connection: RelayConnection;
  key: E2EKey | undefined;
  entries: HistoryEntry[];
  last: number;
  skipped: number;
  /** Which chunks the host holds, asked on the connection's own transfer (a running sync's). */
  held?: (ids: string[]) => Promise<Set<string>>;
}

/** What a command prints. */
export interface Output {
  stdout: string;
  stderr: string;
}

/** `history`'s lines: one per change (of `path` only, when given), and what was left out. */
export function historyOutput(
  history: FolderHistory,
  projectKey: string,
  path: string | undefined,
): Output {
  const { entries, skipped } = history;
  const stdout = changeLines(entries, path)
    .map((line) => `${printable(line)}\n`)
    .join('');
  let stderr = '';
  if (entries.length === 0 && skipped === 0) {
    // A passphrase names the document too: another one (or none) finds nothing kept.
    stderr += `the host keeps nothing of ${printable(projectKey)}'s folder under this name (for an encrypted project: --encrypt with its passphrase)\n`;
  }
  if (skipped > 0) {
    stderr += `${skipped} entries kept by the host could not be opened (another passphrase, or none) and were left out\n`;
  }
  return { stdout, stderr };
}

/**
 * `restore`'s work: the content `path` had at `at` (its last version when undefined), checked to
 * be whole on the host, handed to `put`, which makes it the file's content in a folder document
 * and resolves with the paths that changed (not those that are so already). A `path` ending in
 * `/` (or empty: the whole folder) brings back every file under it: with `at`, those there at
 * that moment; without, every file ever there, each as its last version (a deleted one as it was
 * when deleted). Nothing is deleted. Throws `not_found` and `chunk_missing` (changing nothing)
 * with their lines.
 */
export async function restoreOutput(
  history: FolderHistory,
  projectKey: string,
  path: string,
  at: number | undefined,
  put: (contents: [string, Content][]) => Promise<string[]>,
): Promise<Output> {
  const when = at === undefined ? 'its last version' : new Date(at).toISOString();
  const then = at === undefined ? '' : ` at ${when}`;
  const doc = documentAt(history.entries, at);
  const whole = path === '' || path.endsWith('/');
  const contents: [string, Content][] = [];
  for (const each of whole ? pathsUnder(doc, path, at !== undefined) : [path]) {
    const content = contentIn(doc, each);
    if (content !== undefined) contents.push([each, content]);
  }
  if (contents.length === 0) {
    const what = whole ? `no file under ${path === '' ? 'the folder' : path} is` : `${path} is not`;
    throw new SyncError('not_found', `${what} in what the host keeps of ${projectKey}${then}`);
  }
  for (const [each, content] of contents) {
    if ('blob' in content) await checkHeld(history, content.blob, `${each} as of ${when}`);
  }
  const changed = new Set(await put(contents));
  const lines = contents.map(([each]) =>
    changed.has(each)
      ? `restored ${printable(each)} as of ${when}\n`
      : `${printable(each)} is already as it was\n`,
  );
  return { stdout: lines.join(''), stderr: '' };
}

/**
 * The paths of `doc`'s folder under `prefix` (a folder's path with its `/`, or empty for all):
 * of live files only with `live`, else of every entry, deleted ones too.
 */
function pathsUnder(doc: Y.Doc, prefix: string, live: boolean): string[] {
  const paths = new Set<string>();
  for (const [id, value] of doc.getMap<unknown>('files')) {
    const entry = entryOf(id, value);
    if (typeof entry === 'string' || !entry.path.startsWith(prefix)) continue;
    if (!live || entryLive(entry)) paths.add(entry.path);
  }
  return [...paths].sort();
}

/**
 * What a file held at a moment of the history: its text (with its time and mode when the entry
 * kept them), or its version kept as chunks (which carries its own).
 */
export type Content = { text: string; mtime?: number; mode?: number } | { blob: BlobVersion };

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

/** What `path` held in `doc` (the history at a moment): its live version, else the last before a delete. */
function contentIn(doc: Y.Doc, path: string): Content | undefined {
  const candidates = entriesAt(doc, path);
  const chosen =
    newestLive(candidates) ?? candidates.sort((a, b) => b.time - a.time)[0] ?? undefined;
  if (chosen === undefined) return undefined;
  if (chosen.text === undefined) return { blob: chosen.blob! };
  const { mtime, mode } = chosen;
  return {
    text: chosen.text.toString(),
    ...(mtime === undefined ? {} : { mtime }),
    ...(mode === undefined ? {} : { mode }),
  };
}

/**
 * Refuses (changing nothing) a version kept as chunks of which the host no longer holds some:
 * the sweep dropped them, no device having asked about them for the whole history. Asking
 * marks the held ones used, so they stay while the restored version is fetched.
 */
async function checkHeld(history: FolderHistory, version: BlobVersion, what: string) {
  // A running sync asks with its own transfer (one per connection: answers go by `ref`).
  const transfer =
    history.held === undefined
      ? new ChunkTransfer({ connection: history.connection, key: history.key })
      : undefined;
  try {
    const ids = [...new Set(version.chunks.map(([id]) => id))];
    const held = await (history.held ?? transfer!.held.bind(transfer))(ids);
    const gone = ids.filter((id) => !held.has(id)).length;
    if (gone > 0) {
      throw new SyncError(
        'chunk_missing',
        `${what} cannot be restored: the host no longer holds ${gone} of its ${ids.length} chunks (nothing was changed)`,
      );
    }
  } finally {
    transfer?.close();
  }
}

/**
 * Makes `content` the file at `path` of the folder document (one transaction), as an edit of
 * this device: a text merged into the live text entry, a blob version replacing the live blob's
 * current one (so a device that changed it meanwhile meets the usual conflict rule), else the
 * live entry of the other kind deleted and a new entry made. False when it is so already.
 */
export function putBack(doc: Y.Doc, path: string, content: Content, device: string): boolean {
  const current = newestLive(entriesAt(doc, path));
  const same =
    'text' in content
      ? current?.text?.toString() === content.text &&
        (content.mtime ?? current.mtime) === current.mtime &&
        (content.mode ?? current.mode) === current.mode
      : current?.blob?.digest === content.blob.digest &&
        (content.blob.mtime ?? current.blob.mtime) === current.blob.mtime &&
        (content.blob.mode ?? current.blob.mode) === current.blob.mode;
  if (current !== undefined && same) return false;
  const time = Date.now();
  doc.transact(() => {
    // The file comes back with the time and the mode it had then, on every device.
    const meta = 'text' in content ? { mtime: content.mtime, mode: content.mode } : {};
    if ('text' in content && current?.text !== undefined) {
      editText(current.text, content.text);
      setTextMeta(current.map, meta);
      return;
    }
    const fresh = 'blob' in content ? newVersion(content.blob, device, time) : content.text;
    if (typeof fresh !== 'string' && current?.blob !== undefined) {
      addVersion(current, fresh, true);
      return;
    }
    if (current !== undefined) current.map.set('deleted', entryDigest(current));
    addEntry(doc.getMap<unknown>('files'), { path, content: fresh, device, time, meta });
  });
  return true;
}
