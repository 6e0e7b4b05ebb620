import type * as Y from 'yjs';
import {
  addEntry,
  type BlobVersion,
  blobSplitId,
  entryDigest,
  entryOf,
  type FileEntry,
} from './folder-doc.ts';
import { conflictName, parentsOf } from './folder-names.ts';

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

/** Newest first; the id breaks ties, so every device picks the same. */
function newestFirst(a: FileEntry, b: FileEntry): number {
  return b.time - a.time || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

/**
 * One change that settles a clash: the same path held by several live entries (the newest keeps
 * it; a loser with the same content is deleted, one with other content gets its conflict name),
 * or a file where other entries need a folder (the file gets its conflict name). Every device
 * that sees a clash makes the same change, so concurrent fixes agree.
 */
export type ClashFix =
  | { kind: 'merge'; entry: FileEntry; into: FileEntry }
  | { kind: 'rename'; entry: FileEntry; to: string }
  | { kind: 'split'; entry: FileEntry; version: BlobVersion; to: string };

/** The fixes for the clashes that the entries `ids` are part of. */
export function clashFixes(index: EntryIndex, ids: Iterable<string>): ClashFix[] {
  const paths = new Set<string>();
  for (const id of ids) {
    const path = index.pathOf(id);
    if (path === undefined) continue;
    paths.add(path);
    for (const parent of parentsOf(path)) paths.add(parent);
  }
  const fixes: ClashFix[] = [];
  for (const path of paths) {
    const entries = index.entriesAt(path);
    if (entries.length === 0) continue;
    for (const entry of entries) {
      // Versions of one file made apart: all but the most recent edit move to conflict copies.
      for (const version of entry.heads.slice(1)) {
        const to = conflictName(path, version.time, version.device);
        fixes.push({ kind: 'split', entry, version, to });
      }
    }
    if (index.isFolder(path)) {
      for (const entry of entries) {
        fixes.push({ kind: 'rename', entry, to: conflictName(path, entry.time, entry.device) });
      }
      continue;
    }
    if (entries.length === 1) continue;
    const [winner, ...losers] = entries.sort(newestFirst) as [FileEntry, ...FileEntry[]];
    for (const loser of losers) {
      if (index.digest(loser.id) === index.digest(winner.id)) {
        fixes.push({ kind: 'merge', entry: loser, into: winner });
      } else {
        fixes.push({
          kind: 'rename',
          entry: loser,
          to: conflictName(path, loser.time, loser.device),
        });
      }
    }
  }
  return fixes;
}

/** Applies the fixes (inside the caller's transaction). */
export function applyClashFixes(index: EntryIndex, fixes: ClashFix[]): string[] {
  const lines: string[] = [];
  for (const fix of fixes) {
    if (fix.kind === 'merge') fix.entry.map.set('deleted', index.digest(fix.entry.id));
    else if (fix.kind === 'rename') {
      fix.entry.map.set('path', fix.to);
      lines.push(`conflict: ${fix.entry.path} from device ${fix.entry.device} kept as ${fix.to}`);
    } else {
      const { version, entry } = fix;
      (entry.map.get('blob') as Y.Map<unknown>).delete(version.v);
      // The same bytes made apart on two devices: one version is enough.
      if (version.digest === entry.blob?.digest) continue;
      const fields = { path: fix.to, device: version.device, time: version.time };
      addEntry(
        index.files,
        { ...fields, content: { ...version, replaces: null } },
        blobSplitId(entry.id, version.v),
      );
    }
  }
  return lines;
}
