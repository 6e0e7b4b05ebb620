import { type Dirent, type FSWatcher, lstatSync, readdirSync, watch } from 'node:fs';
import { join } from 'node:path';

/** Called with a path relative to the folder (`/` between parts), or null when none is known. */
export type WatchListener = (path: string | null) => void;

/**
 * Watches `dir` and everything under it; `onError` hears of a watch that could not be set (the
 * full scans go on without it). On Linux one inotify watch per folder, not per file: Node's own
 * recursive watch there (node 20) sets one per file and reads a folder again at every event in
 * it, so a first sync of 10,000 files in 20 folders read 500-entry folders 10,000 times and held
 * 10,000 watches. A folder's watch names the files in it, which is all a scan needs. Elsewhere
 * (macOS, Windows) the system's recursive watch.
 */
export function watchTree(
  dir: string,
  listener: WatchListener,
  onError: (err: unknown) => void,
): { close(): void } {
  if (process.platform !== 'linux') {
    const watcher = watch(dir, { recursive: true }, (_event, name) =>
      listener(typeof name === 'string' ? name : null),
    );
    watcher.on('error', () => {
      // The full scans go on.
    });
    return { close: () => watcher.close() };
  }
  return new FolderWatches(dir, listener, onError);
}

/** One non-recursive watch per folder of the tree, added and dropped as folders come and go. */
class FolderWatches {
  private readonly watches = new Map<string, FSWatcher>();
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly listener: WatchListener,
    private readonly onError: (err: unknown) => void,
  ) {
    this.add('', true);
  }

  close(): void {
    this.closed = true;
    for (const watcher of this.watches.values()) watcher.close();
    this.watches.clear();
  }

  /** Watches the folder `rel` and, walking it, every folder under it (links are not followed). */
  private add(rel: string, first: boolean): void {
    const pending = [rel];
    while (pending.length > 0 && !this.closed) {
      const folder = pending.pop()!;
      if (this.watches.has(folder)) continue;
      const path = folder === '' ? this.root : join(this.root, folder);
      let watcher: FSWatcher;
      try {
        watcher = watch(path, (event, name) => this.folderOnChange(folder, event, name));
      } catch (err: unknown) {
        // The root is what `sync` watches: its failure is said; a folder gone meanwhile is not.
        if (first && folder === rel) this.onError(err);
        continue;
      }
      watcher.on('error', () => this.drop(folder));
      this.watches.set(folder, watcher);
      for (const entry of entriesOf(path)) {
        if (entry.isDirectory())
          pending.push(folder === '' ? entry.name : `${folder}/${entry.name}`);
      }
    }
  }

  private folderOnChange(folder: string, event: string, name: string | Buffer | null): void {
    if (this.closed) return;
    if (typeof name !== 'string') {
      this.listener(null);
      return;
    }
    const rel = folder === '' ? name : `${folder}/${name}`;
    this.listener(rel);
    // A file written in place: nothing was made or removed.
    if (event !== 'rename') return;
    // A folder made (or moved in) is watched with what it holds; its files made before its watch
    // was set are read by the scan of its name, which reads all of it.
    if (isFolder(join(this.root, rel))) this.add(rel, false);
    else if (this.watches.has(rel)) this.drop(rel);
  }

  /** Stops watching `rel` and the folders under it (gone, or no longer a folder). */
  private drop(rel: string): void {
    for (const [folder, watcher] of this.watches) {
      if (folder === rel || folder.startsWith(`${rel}/`)) {
        watcher.close();
        this.watches.delete(folder);
      }
    }
  }
}

function entriesOf(path: string): Dirent[] {
  try {
    return readdirSync(path, { withFileTypes: true });
  } catch {
    return [];
  }
}

function isFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}
