import { closestVersion } from './ancestors.ts';
import { conflictName } from './conflicts.ts';
import { type FileMeta, isWithin, type Stamp, sameStamp, type Walk, withinAny } from './disk.ts';
import {
  addEntry,
  addVersion,
  digestOf,
  type FileEntry,
  newVersion,
  setTextMeta,
} from './document.ts';
import type { FolderMirror } from './mirror.ts';
import type { DiskRecord } from './state-log.ts';
import { applyEdits, editsInto, mergeEdits } from './text-merge.ts';

/**
 * Reads the folder (or the parts of it in `scopes`) and turns what changed on disk since the
 * last agreement into edits of the folder document, inside one transaction of `origin`: an edit
 * of a file as the change from the text it had (so it merges exactly), a new file as a new
 * entry, a file gone as a delete mark (a file renamed on disk, found by its digest, keeps its
 * entry). Resolves with the changed disk records (the caller applies and records them).
 */
export function readFolder(
  mirror: FolderMirror,
  origin: unknown,
  scopes: string[] = [''],
): Map<string, DiskRecord | null> {
  const { disk } = mirror;
  const walk = disk.walk(scopes, (path, isFolder) => mirror.skipsFound(path, isFolder));
  for (const temp of walk.temps) if (!mirror.blobs?.busyTemps.has(temp)) disk.removeQuietly(temp);
  mirror.noteSkippedNames(scopes, walk.skipped.keys());
  for (const [path, why] of walk.skipped) {
    mirror.sayOnce(`skip ${path} ${why}`, `skipped ${path}: ${why}`);
  }
  const changes = new Map<string, DiskRecord | null>();
  const now = mirror.now();
  const inScope = withinAny(scopes);
  mirror.doc.transact(() => {
    const added = readChanged(mirror, walk, changes, now);
    for (const path of mirror.skippedHere()) {
      if (inScope(path) && !walk.files.has(path)) mirror.skipHere(path, false);
    }
    const missing = missingFiles(mirror, walk, inScope);
    placeAdded(mirror, added, missing, changes, now);
    markDeleted(mirror, missing, changes);
  }, origin);
  return changes;
}

/**
 * The files read again whose stamp changed: an edit or new times and modes of a known file go
 * in at once, a binary file goes as chunks, one that cannot be read is skipped (and said once);
 * the new text files are returned, for renames to be found among them.
 */
function readChanged(
  mirror: FolderMirror,
  walk: Walk,
  changes: Map<string, DiskRecord | null>,
  now: number,
): FoundFile[] {
  const { disk, onDisk } = mirror;
  const added: FoundFile[] = [];
  for (const [path, stamp] of walk.files) {
    const record = onDisk.get(path);
    const known = record !== undefined || mirror.isSkippedHere(path);
    if (known && sameStamp(mirror.stampOf(path), stamp)) continue;
    if (mirror.blobs?.uploading(path, stamp)) continue;
    const read = disk.readText(path);
    if (read === undefined) continue;
    const problem =
      'binary' in read
        ? blobProblem(mirror, read.binary)
        : 'problem' in read
          ? read.problem
          : undefined;
    if (problem !== undefined) {
      mirror.skipHere(path);
      // A file that could not be read is tried again at every scan: a permission given back
      // changes none of what a stamp holds.
      if ('binary' in read) mirror.setStamp(path, stamp);
      mirror.sayOnce(`skip ${path} ${problem}`, `skipped ${path}: ${problem}`);
      continue;
    }
    mirror.skipHere(path, false);
    if ('binary' in read) {
      // Sent as chunks; its version goes in the document once the host holds them all (its
      // stamp is recorded then: until that, a write here from another device waits).
      mirror.blobs!.upload(path, read.binary);
      continue;
    }
    if (!('text' in read)) continue;
    mirror.setStamp(path, read.stamp);
    const digest = digestOf(read.text);
    const meta = mirror.metaOf(read.stamp);
    if (record === undefined) added.push({ path, text: read.text, digest, meta });
    else if (digest !== record.digest)
      editHere(mirror, path, record, { text: read.text, digest, meta }, changes, now);
    else metaHere(mirror, path, record, meta);
  }
  return added;
}

/** The recorded files no longer here in the scanned scopes (not ignored, not in an unreadable folder). */
function missingFiles(
  mirror: FolderMirror,
  walk: Walk,
  inScope: (path: string) => boolean,
): Map<string, DiskRecord> {
  const { onDisk } = mirror;
  const missing = new Map<string, DiskRecord>();
  for (const [path, record] of onDisk) {
    if (walk.files.has(path) || mirror.isSkippedHere(path) || !inScope(path)) continue;
    // A file that became ignored is not gone: it stays here, and its entry as it was.
    if (mirror.ignores(path)) continue;
    if (walk.unreadable.some((folder) => isWithin(path, folder))) continue;
    missing.set(path, record);
  }
  return missing;
}

/**
 * The new files: a rename when a missing file had the same digest (its entry moves), a first
 * meeting with another device's text at that path, or a new entry.
 */
function placeAdded(
  mirror: FolderMirror,
  added: FoundFile[],
  missing: Map<string, DiskRecord>,
  changes: Map<string, DiskRecord | null>,
  now: number,
): void {
  const met: (FoundFile & { entry: FileEntry })[] = [];
  const missingByDigest = new Map<string, string[]>();
  for (const [path, record] of missing) {
    const paths = missingByDigest.get(record.digest);
    if (paths === undefined) missingByDigest.set(record.digest, [path]);
    else paths.push(path);
  }
  for (const file of added) {
    const from = missingByDigest.get(file.digest)?.find((path) => missing.has(path));
    const entry = from === undefined ? undefined : entryAt(mirror, from, missing.get(from)!);
    if (from !== undefined && entry !== undefined) {
      missing.delete(from);
      entry.map.set('path', file.path);
      setTextMeta(entry.map, file.meta);
      changes.set(from, null);
      changes.set(file.path, { id: entry.id, digest: file.digest });
      mirror.say('out', `sent ${from} → ${file.path} (renamed)`);
      continue;
    }
    const there = mirror.index.winnerAt(file.path);
    if (there?.text !== undefined && [...mirror.diskPathsOf(there.id)].length === 0) {
      met.push({ ...file, entry: there });
      continue;
    }
    addNew(mirror, file, changes, now);
  }
  meetHere(mirror, met, changes, now);
}

/** The files still missing after the renames: their entries marked deleted. */
function markDeleted(
  mirror: FolderMirror,
  missing: Map<string, DiskRecord>,
  changes: Map<string, DiskRecord | null>,
): void {
  for (const [path, record] of missing) {
    const entry = entryAt(mirror, path, record);
    // A document that moved on since this file was last written keeps its newer version:
    // the delete was of an older one, and the newer comes back at the next write.
    if (entry !== undefined) {
      entry.map.set('deleted', record.digest);
      mirror.say('out', `sent ${path} (deleted)`);
    } else mirror.retryLater(path);
    changes.set(path, null);
    mirror.forgetStamp(path);
  }
}

/** A text file found here with no record. */
interface FoundFile {
  path: string;
  text: string;
  digest: string;
  meta: FileMeta;
}

function addNew(
  mirror: FolderMirror,
  file: FoundFile,
  changes: Map<string, DiskRecord | null>,
  now: number,
): void {
  const { path, text: content, digest, meta } = file;
  const id = addEntry(mirror.files, { path, content, device: mirror.device, time: now, meta });
  changes.set(path, { id, digest });
  mirror.say('out', `sent ${path} (new)`);
}

/**
 * Text files found here at the path of a text another device made, which this device never
 * wrote: the same text is that entry's file; a text with a common ancestor in the host's history
 * (a first `sync`, ancestors.ts) merges into the entry three ways, as an edit saved here
 * does, and the writer puts the merged text in the file; any other is a new entry, and the two
 * are settled as a conflict (the most recent keeps the name).
 */
function meetHere(
  mirror: FolderMirror,
  met: (FoundFile & { entry: FileEntry })[],
  changes: Map<string, DiskRecord | null>,
  now: number,
): void {
  const unlike = met.filter(({ entry, digest }) => mirror.index.digest(entry.id) !== digest);
  const versions =
    unlike.length === 0 ? undefined : mirror.ancestors?.(unlike.map(({ entry }) => entry.id));
  for (const file of met) {
    const { path, text, digest, entry } = file;
    if (mirror.index.digest(entry.id) === digest) {
      changes.set(path, { id: entry.id, digest });
      continue;
    }
    const base = closestVersion(versions?.get(entry.id) ?? [], text);
    if (base === undefined || entry.text === undefined) {
      addNew(mirror, file, changes, now);
      continue;
    }
    const current = entry.text.toString();
    const edits = mergeEdits(base, text, current);
    editsInto(entry.text, edits);
    setTextMeta(entry.map, file.meta);
    const merged = applyEdits(current, edits);
    // The file holds `text` until the merged text is written over it.
    mirror.setBase(path, merged === text ? null : text);
    changes.set(path, { id: entry.id, digest });
    if (merged !== current)
      mirror.say('out', `sent ${path} (merged with the version on other devices)`);
  }
}

/** Why a file that is not text does not sync here, or undefined when it does. */
function blobProblem(mirror: FolderMirror, stamp: Stamp): string | undefined {
  if (mirror.blobs === undefined)
    return 'not a text file (files kept as chunks are not synced here)';
  if (stamp.size > mirror.maxFileBytes) {
    return `larger than --max-file-bytes (${stamp.size} > ${mirror.maxFileBytes} bytes)`;
  }
  return undefined;
}

/**
 * The live text entry that the file at `path` is, whose text moved on from the content on disk
 * while the file's base (that content) was kept; else undefined.
 */
function movedTextAt(
  mirror: FolderMirror,
  path: string,
  record: DiskRecord,
): FileEntry | undefined {
  const base = mirror.bases.get(path);
  if (base === undefined || digestOf(base) !== record.digest) return undefined;
  const entry = mirror.index.get(record.id);
  if (typeof entry !== 'object' || entry.path !== path || entry.text === undefined)
    return undefined;
  return mirror.index.isLive(record.id) ? entry : undefined;
}

/** The live entry that the file at `path` is, still with the content on disk; else undefined. */
function entryAt(mirror: FolderMirror, path: string, record: DiskRecord): FileEntry | undefined {
  const { index } = mirror;
  const entry = index.get(record.id);
  if (typeof entry !== 'object' || entry.path !== path || !index.isLive(record.id))
    return undefined;
  return index.digest(record.id) === record.digest ? entry : undefined;
}

/**
 * An edit on disk of a file the document has. When the document still holds what the file had
 * (its base), the edit is the change from it, region by region; when other devices' edits came
 * in meanwhile and were not written here yet, the file, the base and the document merge three
 * ways, and the writer then puts the merged text in the file.
 */
function editHere(
  mirror: FolderMirror,
  path: string,
  record: DiskRecord,
  read: { text: string; digest: string; meta: FileMeta },
  changes: Map<string, DiskRecord | null>,
  now: number,
): void {
  const { text, digest, meta } = read;
  const entry = entryAt(mirror, path, record);
  if (entry?.text !== undefined) {
    mirror.editText(entry.text, text);
    setTextMeta(entry.map, meta);
    mirror.setBase(path, null);
    changes.set(path, { id: entry.id, digest });
    mirror.say('out', `sent ${path}`);
    return;
  }
  const moved = movedTextAt(mirror, path, record);
  if (moved?.text !== undefined) {
    const current = moved.text.toString();
    const edits = mergeEdits(mirror.bases.get(path)!, text, current);
    editsInto(moved.text, edits);
    setTextMeta(moved.map, meta);
    const merged = applyEdits(current, edits);
    // The file holds `text` until the merged text is written over it.
    mirror.setBase(path, merged === text ? null : text);
    changes.set(path, { id: moved.id, digest });
    mirror.say('out', `sent ${path} (merged with changes from other devices)`);
    return;
  }
  if (entry !== undefined) {
    // A file kept as chunks that is text now: its entry is deleted, a text entry takes its place.
    entry.map.set('deleted', record.digest);
    const fields = { path, content: text, device: mirror.device, time: now, meta };
    const id = addEntry(mirror.files, fields);
    changes.set(path, { id, digest });
    mirror.say('out', `sent ${path}`);
    return;
  }
  // The document has moved on from what this file was built on (a write here failed): this
  // version is kept whole as a conflict copy, and the document's goes in its place.
  const to = conflictName(path, now, mirror.device);
  addEntry(mirror.files, { path: to, content: text, device: mirror.device, time: now, meta });
  mirror.retryLater(path);
  mirror.say('out', `sent ${to} (conflict copy of ${path}: edited here from an older version)`);
}

/**
 * A text file read again with the content it had: a change of its time or mode alone (a
 * `chmod`, a `touch`) goes in its entry. An entry of an older version, with neither, takes
 * them without a line.
 */
function metaHere(mirror: FolderMirror, path: string, record: DiskRecord, meta: FileMeta): void {
  const entry = entryAt(mirror, path, record);
  if (entry?.text === undefined) return;
  const modeChanged =
    meta.mode !== undefined && entry.mode !== undefined && meta.mode !== entry.mode;
  setTextMeta(entry.map, meta);
  if (modeChanged) mirror.say('out', `sent ${path} (mode ${meta.mode!.toString(8)})`);
}

/**
 * A file sent as chunks, still as it was read: its version goes in the document (inside one
 * transaction of `origin`), as the next version of its entry, or of a new entry when the file is
 * new here or was text. Resolves with the changed disk record.
 *
 * The version's time is when the file was last written here (its modification time; never later
 * than now, so a clock set ahead or a file touched into the future does not win every conflict):
 * the most recent edit keeps the name when two devices changed the file apart, whichever of them
 * comes online or finishes its upload last.
 */
export function publishBlob(
  mirror: FolderMirror,
  origin: unknown,
  path: string,
  file: { size: number; digest: string; chunks: [string, number][] },
  stamp: Stamp,
): Map<string, DiskRecord | null> {
  const { onDisk, index, device } = mirror;
  const time = Math.min(Math.floor(stamp.mtimeMs), mirror.now());
  const digest = file.digest.slice(0, 32);
  const changes = new Map<string, DiskRecord | null>();
  mirror.doc.transact(() => {
    const record = onDisk.get(path);
    const current = record === undefined ? undefined : entryAt(mirror, path, record);
    // With `--no-perms` the mode the entry had stays.
    const meta = { mode: current?.mode, ...mirror.metaOf(stamp) };
    const version = newVersion({ ...file, ...meta }, device, time);
    const known = record === undefined ? undefined : index.get(record.id);
    // The entry moved on since this file was written here (a version not fetched yet): this
    // one goes beside it, and the most recent edit keeps the name on every device.
    const behind =
      current === undefined &&
      typeof known === 'object' &&
      known.blob !== undefined &&
      known.path === path &&
      index.isLive(known.id);
    if (current?.blob !== undefined || behind) {
      const entry = current ?? (known as FileEntry);
      addVersion(entry, version, !behind);
      changes.set(path, { id: entry.id, digest, stamp });
      mirror.say('out', `sent ${path}`);
      return;
    }
    if (current !== undefined) current.map.set('deleted', record!.digest);
    const id = addEntry(mirror.files, { path, content: version, device, time });
    changes.set(path, { id, digest, stamp });
    mirror.say('out', `sent ${path}${record === undefined ? ' (new)' : ''}`);
  }, origin);
  return changes;
}
