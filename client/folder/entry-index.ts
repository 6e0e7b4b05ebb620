import type * as Y from 'yjs';
import { newestFirst } from './conflicts.ts';
import { entryDigest, entryOf, type FileEntry } from './document.ts';
import { parentsOf } from './names.ts';

/**
 * The entries of the folder document with what is derived from them, kept current as
 * transactions change them (`forgetChanged` with each transaction's events), so that a change
 * costs work for the entries it touched, not for the whole folder: each entry's digest and
 * liveness, the live entries by path, and the folders the live paths need. The ids changed
 * since the last `takeChanged` are collected for the writer.
 */
export class EntryIndex {
  private readonly cache = new Map<
    string,
    { entry: FileEntry | string; digest: string | undefined }
  >();
  /** Path of each live, usable entry. */
  private readonly livePath = new Map<string, string>();
  private readonly byPath = new Map<string, Set<string>>();
  /** For each folder, how many live paths are under it. */
  private readonly folders = new Map<string, number>();
  private changed = new Set<string>();

  constructor(readonly files: Y.Map<unknown>) {
    for (const id of files.keys()) this.refresh(id);
  }

  /** Brings what is derived up to date for the ids a transaction changed. */
  forgetChanged(events: Y.YEvent<Y.AbstractType<unknown>>[]): void {
    const ids = new Set<string>();
    for (const event of events) {
      if (event.target === this.files) {
        for (const id of event.changes.keys.keys()) ids.add(id);
      } else {
        const id = event.path[0];
        if (typeof id === 'string') ids.add(id);
      }
    }
    for (const id of ids) this.refresh(id);
  }

  /** The ids changed since the last call (every id at the start). */
  takeChanged(): Set<string> {
    const changed = this.changed;
    this.changed = new Set();
    return changed;
  }

  private refresh(id: string): void {
    this.cache.delete(id);
    const before = this.livePath.get(id);
    if (before !== undefined) {
      this.livePath.delete(id);
      const ids = this.byPath.get(before);
      ids?.delete(id);
      if (ids?.size === 0) this.byPath.delete(before);
      for (const folder of parentsOf(before)) {
        const count = (this.folders.get(folder) ?? 1) - 1;
        if (count === 0) this.folders.delete(folder);
        else this.folders.set(folder, count);
      }
    }
    if (this.isLive(id)) {
      const path = (this.get(id) as FileEntry).path;
      this.livePath.set(id, path);
      const ids = this.byPath.get(path);
      if (ids === undefined) this.byPath.set(path, new Set([id]));
      else ids.add(id);
      for (const folder of parentsOf(path))
        this.folders.set(folder, (this.folders.get(folder) ?? 0) + 1);
    }
    this.changed.add(id);
  }

  /** The entry of `id`, or why it is unusable; undefined when there is none. */
  get(id: string): FileEntry | string | undefined {
    let cached = this.cache.get(id);
    if (cached === undefined) {
      if (!this.files.has(id)) return undefined;
      cached = { entry: entryOf(id, this.files.get(id)), digest: undefined };
      this.cache.set(id, cached);
    }
    return cached.entry;
  }

  /** The digest of the entry's current text. */
  digest(id: string): string | undefined {
    const entry = this.get(id);
    if (typeof entry !== 'object') return undefined;
    const cached = this.cache.get(id)!;
    cached.digest ??= entryDigest(entry);
    return cached.digest;
  }

  /** Whether the entry is a file that exists (not deleted, or edited since its delete). */
  isLive(id: string): boolean {
    const entry = this.get(id);
    if (typeof entry !== 'object') return false;
    return entry.deleted === undefined || entry.deleted !== this.digest(id);
  }

  /** The path of a live entry; undefined for one deleted, unusable or unknown. */
  pathOf(id: string): string | undefined {
    return this.livePath.get(id);
  }

  /** The live entries at `path` (several when devices clash). */
  entriesAt(path: string): FileEntry[] {
    return [...(this.byPath.get(path) ?? [])].map((id) => this.get(id) as FileEntry);
  }

  /** The entry the folder shows at `path`: the newest there; none where live paths need a folder. */
  winnerAt(path: string): FileEntry | undefined {
    if (this.folders.has(path)) return undefined;
    const entries = this.entriesAt(path);
    return entries.length === 0
      ? undefined
      : entries.reduce((a, b) => (newestFirst(a, b) > 0 ? b : a));
  }

  /** Every live path, for a view of the whole folder. */
  paths(): IterableIterator<string> {
    return this.byPath.keys();
  }

  /** Whether `path` is a folder that live paths are in. */
  isFolder(path: string): boolean {
    return this.folders.has(path);
  }
}
