import { createHash, randomBytes } from 'node:crypto';
import * as Y from 'yjs';
import { conflictName, parentsOf, pathProblem } from './folder-names.ts';

/**
 * The folder document: what `sync-host sync` keeps in step. Its `files` map holds one entry per
 * file, under a random id that never changes (so a rename is one field, and two devices that
 * create the same name make two entries instead of one overwriting the other):
 *
 * - `path`: the file's relative path (`/`-separated), checked by `pathProblem` on every device;
 * - `text`: a `Y.Text` with the content; edits merge character by character;
 * - `time`, `device`: when and where the entry was made (the newer of two entries with one path
 *   keeps the name; the other's conflict copy is named by its own);
 * - `deleted`: absent for a live file; a delete stores the digest of the content it removed. The
 *   file stays deleted while its content has that digest: an edit made anywhere meanwhile (on a
 *   device that had not seen the delete) changes it, and the file is back with that edit on
 *   every device. The content stays in the document.
 */
export const folderDocName = 'files';

export interface FileEntry {
  id: string;
  map: Y.Map<unknown>;
  path: string;
  text: Y.Text;
  time: number;
  device: string;
  deleted: string | undefined;
}

/** The digest of a file's content that deletes and the disk records compare. */
export function digestOf(content: string): string {
  return createHash('sha256').update(content).digest('hex').slice(0, 32);
}

export function newEntryId(): string {
  return randomBytes(12).toString('hex');
}

/** The entry under `id`, or why it cannot be used (a value another device got wrong). */
export function entryOf(id: string, value: unknown): FileEntry | string {
  if (!(value instanceof Y.Map)) return 'the entry is not a map';
  const map = value as Y.Map<unknown>;
  const path = map.get('path');
  const text = map.get('text');
  const time = map.get('time');
  const device = map.get('device');
  const deleted = map.get('deleted');
  const problem = pathProblem(path);
  if (problem !== undefined) return problem;
  if (!(text instanceof Y.Text)) return 'its content is not text';
  if (typeof time !== 'number' || !Number.isFinite(time)) return 'its time is not a number';
  if (typeof device !== 'string' || device === '') return 'its device is not a string';
  if (deleted !== undefined && typeof deleted !== 'string')
    return 'its delete mark is not a string';
  return { id, map, path: path as string, text, time, device, deleted };
}

/** Adds a new file entry (inside the caller's transaction). */
export function addEntry(
  files: Y.Map<unknown>,
  fields: { path: string; content: string; device: string; time: number },
): string {
  const id = newEntryId();
  const map = new Y.Map<unknown>();
  map.set('path', fields.path);
  map.set('text', new Y.Text(fields.content));
  map.set('time', fields.time);
  map.set('device', fields.device);
  files.set(id, map);
  return id;
}

/**
 * The entries of the document with what is derived from them, kept current by the caller
 * (`forget` the ids a transaction touched): the digest of each text and whether it is live.
 */
export class EntryIndex {
  private readonly cache = new Map<
    string,
    { entry: FileEntry | string; digest: string | undefined }
  >();

  constructor(readonly files: Y.Map<unknown>) {}

  /** Drops what is cached of the ids a transaction changed. */
  forgetChanged(events: Y.YEvent<Y.AbstractType<unknown>>[]): void {
    for (const event of events) {
      if (event.target === this.files) {
        for (const id of event.changes.keys.keys()) this.cache.delete(id);
      } else {
        const id = event.path[0];
        if (typeof id === 'string') this.cache.delete(id);
      }
    }
  }

  /** The entry of `id`, or why it is unusable; undefined when there is none. */
  get(id: string): FileEntry | string | undefined {
    let cached = this.cache.get(id);
    if (cached === undefined) {
      const value = this.files.get(id);
      if (value === undefined) return undefined;
      cached = { entry: entryOf(id, value), digest: undefined };
      this.cache.set(id, cached);
    }
    return cached.entry;
  }

  /** The digest of the entry's current text. */
  digest(id: string): string | undefined {
    const entry = this.get(id);
    if (typeof entry !== 'object') return undefined;
    const cached = this.cache.get(id)!;
    cached.digest ??= digestOf(entry.text.toString());
    return cached.digest;
  }

  /** Whether the entry is a file that exists (not deleted, or edited since its delete). */
  isLive(id: string): boolean {
    const entry = this.get(id);
    if (typeof entry !== 'object') return false;
    return entry.deleted === undefined || entry.deleted !== this.digest(id);
  }

  /** Every live, usable entry by path (several when devices clash). */
  livePaths(): Map<string, FileEntry[]> {
    const byPath = new Map<string, FileEntry[]>();
    for (const id of this.files.keys()) {
      if (!this.isLive(id)) continue;
      const entry = this.get(id) as FileEntry;
      const list = byPath.get(entry.path);
      if (list === undefined) byPath.set(entry.path, [entry]);
      else list.push(entry);
    }
    return byPath;
  }

  /** Unusable entries with their problem (an id set to undefined too). */
  *problems(): Generator<[string, string]> {
    for (const id of this.files.keys()) {
      const entry = this.get(id);
      if (typeof entry === 'string') yield [id, entry];
      else if (entry === undefined) yield [id, 'the entry is empty'];
    }
  }
}

/** Newest first; the id breaks ties, so every device picks the same. */
function newestFirst(a: FileEntry, b: FileEntry): number {
  return b.time - a.time || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}

/**
 * One change that settles a clash: the same path held by several live entries (the newest keeps
 * it; a loser with the same content is deleted, one with other content gets its conflict name),
 * or a file where another entry needs a folder (the file gets its conflict name). Every device
 * that sees a clash makes the same change, so concurrent fixes agree.
 */
export type ClashFix =
  | { kind: 'merge'; entry: FileEntry; into: FileEntry }
  | { kind: 'rename'; entry: FileEntry; to: string };

export function clashFixes(index: EntryIndex, byPath: Map<string, FileEntry[]>): ClashFix[] {
  const fixes: ClashFix[] = [];
  const folders = new Set<string>();
  for (const path of byPath.keys()) for (const parent of parentsOf(path)) folders.add(parent);
  for (const [path, entries] of byPath) {
    const sorted = [...entries].sort(newestFirst);
    const [winner, ...losers] = sorted as [FileEntry, ...FileEntry[]];
    if (folders.has(path)) {
      for (const entry of sorted) {
        fixes.push({ kind: 'rename', entry, to: conflictName(path, entry.time, entry.device) });
      }
      continue;
    }
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
export function applyClashFixes(index: EntryIndex, fixes: ClashFix[]): void {
  for (const fix of fixes) {
    if (fix.kind === 'merge') fix.entry.map.set('deleted', index.digest(fix.entry.id));
    else fix.entry.map.set('path', fix.to);
  }
}
