import * as Y from 'yjs';
import { entryDigest, entryLive, entryOf } from '../folder/document.ts';
import type { HistoryEntry } from '../yjs-history.ts';

/**
 * `history`'s lines from the host's entries of a folder document: the document rebuilt entry by
 * entry, and after each, the files that entry touched compared with what they were. Only the
 * entries an update changed are read again (a deep observer names them), so the work grows with
 * the entries and what they change, not with entries times files.
 */

/** What one entry of the folder document is, as far as the history tells. */
interface EntryState {
  path: string;
  live: boolean;
  digest: string;
}

/** Each path's state (the digests of its live versions, or deleted) and each live entry's path. */
class FolderStates {
  private readonly entries = new Map<string, EntryState>();
  private readonly idsAt = new Map<string, Set<string>>();

  /** The state of `path`: its live versions' digests, `deleted`, or undefined (never seen). */
  stateOf(path: string): string | undefined {
    const ids = this.idsAt.get(path);
    if (ids === undefined || ids.size === 0) return undefined;
    const live: string[] = [];
    for (const id of ids) {
      const entry = this.entries.get(id)!;
      if (entry.live) live.push(entry.digest);
    }
    return live.length === 0 ? 'deleted' : live.sort().join(',');
  }

  /** The path of entry `id` while it is live. */
  livePathOf(id: string): string | undefined {
    const entry = this.entries.get(id);
    return entry?.live === true ? entry.path : undefined;
  }

  /** The paths the entries `ids` are at here and in `files` (both, for one moved). */
  pathsOf(files: Y.Map<unknown>, ids: Iterable<string>): Set<string> {
    const paths = new Set<string>();
    for (const id of ids) {
      const before = this.entries.get(id);
      if (before !== undefined) paths.add(before.path);
      const entry = entryOf(id, files.get(id));
      if (typeof entry !== 'string') paths.add(entry.path);
    }
    return paths;
  }

  /** Reads the entries `ids` of `files` again (an unusable one is left as it was). */
  reread(files: Y.Map<unknown>, ids: Iterable<string>): void {
    for (const id of ids) {
      const before = this.entries.get(id);
      const entry = entryOf(id, files.get(id));
      if (typeof entry === 'string') continue;
      if (before !== undefined && before.path !== entry.path)
        this.idsAt.get(before.path)?.delete(id);
      const at = this.idsAt.get(entry.path);
      if (at === undefined) this.idsAt.set(entry.path, new Set([id]));
      else at.add(id);
      this.entries.set(id, {
        path: entry.path,
        live: entryLive(entry),
        digest: entryDigest(entry),
      });
    }
  }
}

/**
 * One line per change of a file (of `path` only, when given), oldest first. A file renamed
 * (its entry at another path) is one line, `renamed  <old> → <new>`, listed for either path,
 * instead of a file created at the new path while the old one drops out of the history.
 */
export function changeLines(entries: HistoryEntry[], path: string | undefined): string[] {
  const lines: string[] = [];
  const doc = new Y.Doc();
  const files = doc.getMap<unknown>('files');
  const touched = new Set<string>();
  files.observeDeep((events) => {
    for (const event of events) {
      if (event instanceof Y.YMapEvent && event.target === files)
        for (const key of event.keysChanged) touched.add(key);
      else if (event.path.length > 0) touched.add(String(event.path[0]));
    }
  });
  const known = new FolderStates();
  for (const entry of entries) {
    touched.clear();
    Y.applyUpdate(doc, entry.update);
    const names = known.pathsOf(files, touched);
    const was = new Map([...names].map((name) => [name, known.stateOf(name)]));
    const wasAt = new Map([...touched].map((id) => [id, known.livePathOf(id)]));
    known.reread(files, touched);
    const line = (change: string, name: string) =>
      lines.push(`${new Date(entry.at).toISOString()}  device ${entry.from}  ${change}  ${name}`);
    const renames: [string, string][] = [];
    for (const [id, before] of wasAt) {
      const now = known.livePathOf(id);
      if (before !== undefined && now !== undefined && before !== now) renames.push([before, now]);
    }
    const renamedTo = new Set(renames.map(([, to]) => to));
    const renamedAway = new Set(renames.map(([from]) => from));
    for (const [from, to] of renames.sort()) {
      if (path === undefined || path === from || path === to) line('renamed', `${from} → ${to}`);
    }
    for (const name of names) {
      if (path !== undefined && name !== path) continue;
      const state = known.stateOf(name);
      const before = was.get(name);
      if (state === undefined || before === state) continue;
      // The two ends of a rename are its line: the new path is not created, the old one is
      // not deleted (unless another file there was, or is, live).
      if (renamedTo.has(name) && (before === undefined || before === 'deleted')) continue;
      if (renamedAway.has(name) && state === 'deleted') continue;
      const change =
        state === 'deleted'
          ? 'deleted'
          : before === undefined
            ? 'created'
            : before === 'deleted'
              ? 'restored'
              : 'changed';
      line(change, name);
    }
  }
  return lines;
}
