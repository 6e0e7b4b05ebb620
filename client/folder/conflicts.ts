import type * as Y from 'yjs';
import type { Disk } from './disk.ts';
import { addEntry, type BlobVersion, type FileEntry } from './document.ts';
import { maxSegmentBytes, parentsOf } from './names.ts';

const encoder = new TextEncoder();

/**
 * Where conflicts are decided. Two versions of one path that no device saw both of (two devices
 * made the same name apart, a file where another device made a folder, two versions of a file
 * kept as chunks made apart) are settled here, the same way on every device:
 *
 * - **which keeps the name**: the most recent edit (`newestFirst`: by time, the entry id breaking
 *   ties); a folder that live paths need keeps its name over a file;
 * - **what the other becomes**: nothing when its content is the same (it is one file), else a
 *   conflict copy named `<name>.sync-conflict-<YYYYMMDD-HHMMSS>-<device id>.<ext>`
 *   (`conflictName`) by its own time and device, an ordinary file that syncs like any other;
 * - a file here that a write from another device would replace, changed here meanwhile (and not
 *   a text that merges), moves to its conflict name on disk first (`moveToConflictName`).
 *
 * Text that can be merged never gets here: it merges (text-merge.ts).
 */

/** The parts of the entry index the settlement reads (entry-index.ts). */
export interface ClashView {
  readonly files: Y.Map<unknown>;
  pathOf(id: string): string | undefined;
  entriesAt(path: string): FileEntry[];
  isFolder(path: string): boolean;
  digest(id: string): string | undefined;
}

/** Newest first; the id breaks ties, so every device picks the same. */
export function newestFirst(a: FileEntry, b: FileEntry): number {
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
export function clashFixes(index: ClashView, ids: Iterable<string>): ClashFix[] {
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
export function applyClashFixes(index: ClashView, fixes: ClashFix[]): string[] {
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
      lines.push(`conflict: ${entry.path} from device ${version.device} kept as ${fix.to}`);
    }
  }
  return lines;
}

/**
 * The name a version that lost a clash takes: `<name>.sync-conflict-<YYYYMMDD-HHMMSS>-<device
 * id>.<ext>`, the time in UTC (every device computes the same name), the stem shortened when
 * the last part would pass the length limit.
 */
export function conflictName(path: string, timeMs: number, device: string): string {
  const slash = path.lastIndexOf('/');
  const folder = path.slice(0, slash + 1);
  const base = path.slice(slash + 1);
  const dot = base.lastIndexOf('.');
  const stem = dot > 0 ? base.slice(0, dot) : base;
  const ext = dot > 0 ? base.slice(dot) : '';
  // A time another device sent may be past what a date holds (±8.64e15 ms): then the epoch.
  const date = new Date(timeMs);
  const stamp = (Number.isNaN(date.getTime()) ? new Date(0) : date)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace('T', '-')
    .slice(0, 15);
  const suffix = `.sync-conflict-${stamp}-${device.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40)}${ext}`;
  let shortStem = stem;
  while (shortStem.length > 1 && encoder.encode(shortStem + suffix).length > maxSegmentBytes) {
    shortStem = [...shortStem].slice(0, -1).join('');
  }
  return `${folder}${shortStem}${suffix}`;
}

/** The part of a name that marks a conflict copy (see `conflictName`). */
export const conflictPattern = /\.sync-conflict-\d{8}-\d{6}-[A-Za-z0-9_-]+(\.[^/]*)?$/;

/** The id of the entry a version made apart moves to: the same on every device. */
export function blobSplitId(entryId: string, version: string): string {
  return `${entryId}~${version}`.slice(0, 80);
}

/**
 * Moves this device's version of `path` to its conflict name, never over an earlier copy: when
 * the name of this second is taken, the next second's is used.
 */
export function moveToConflictName(disk: Disk, path: string, now: number, device: string) {
  return disk.moveAside(path, conflictName(path, now, device), (n) =>
    conflictName(path, now + n * 1_000, device),
  );
}
