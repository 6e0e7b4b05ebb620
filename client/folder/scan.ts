import { closestVersion } from './ancestors.ts';
import { conflictName } from './conflicts.ts';
import { type FileMeta, isWithin, type Stamp, sameStamp, type Walk, withinAny } from './disk.ts';
import { addEntry, digestOf, type FileEntry, setTextMeta } from './document.ts';
import type { FolderMirror } from './mirror.ts';
import type { DiskRecord } from './state-log.ts';
import { applyEdits, editsInto, mergeEdits } from './text-merge.ts';

/**
 * Reads the folder (or the parts of it in `scopes`) and turns what changed on disk since the
 * last agreement into edits of the disk document, inside one transaction of `origin`: an edit
 * of a file as the change from the text it had (so it merges exactly), a new file as a new
 * entry, a file gone as a delete mark (a file renamed on disk, found by its digest, keeps its
 * entry). Resolves with the changed disk records (the caller applies and records them).
 */
export function readFolder(
  mirror: FolderMirror,
  origin: unknown,
  scopes: string[] = [''],
  recordBatch: (changes: Map<string, DiskRecord | null>) => void = () => undefined,
): Map<string, DiskRecord | null> {
  const { disk } = mirror;
  const walk = disk.walk(scopes, (path, isFolder) => mirror.skipsFound(path, isFolder));
  for (const temp of walk.temps) if (!mirror.blobs?.busyTemps.has(temp)) disk.removeQuietly(temp);
  mirror.noteSkippedNames(scopes, walk.skipped.keys());
  for (const [path, why] of walk.skipped) {
    mirror.sayOnce(`skip ${path} ${why}`, `skipped ${path}: ${why}`);
  }
  let changes = new Map<string, DiskRecord | null>();
  const now = mirror.now();
  const inScope = withinAny(scopes);
  let added: FoundFile[] = [];
  let missing = new Map<string, DiskRecord>();
  mirror.doc.transact(() => {
    added = readChanged(mirror, walk, changes, now);
    for (const path of mirror.skippedHere()) {
      if (inScope(path) && !walk.files.has(path)) mirror.skipHere(path, false);
    }
    missing = missingFiles(mirror, walk, inScope);
  }, origin);
  // New files go in a transaction per few MiB, each recorded (and sent) before the next is
  // made: a first scan of a large folder holds one batch's update at a time, not the folder's,
  // and the other devices start writing while this one still reads.
  const met: FirstMeeting[] = [];
  for (const batch of batchesOf(added)) {
    if (changes.size > 0) recordBatch(changes);
    changes = new Map();
    const batchChanges = changes;
    mirror.doc.transact(() => {
      met.push(...placeAdded(mirror, batch, missing, batchChanges, now));
    }, origin);
  }
  const lastChanges = changes;
  mirror.doc.transact(() => {
    meetHere(mirror, met, lastChanges, now);
    markDeleted(mirror, missing, lastChanges);
  }, origin);
  return changes;
}

/** Text bytes of new files per transaction of a scan. */
const batchTextBytes = 4_194_304;

/** `added` cut in runs of about `batchTextBytes` of text each. */
function* batchesOf(added: FoundFile[]): Generator<FoundFile[]> {
  let batch: FoundFile[] = [];
  let bytes = 0;
  for (const file of added) {
    batch.push(file);
    bytes += file.text.length;
    if (bytes < batchTextBytes) continue;
    yield batch;
    batch = [];
    bytes = 0;
  }
  if (batch.length > 0) yield batch;
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

/** A text file found here at the path of another device's text (see `meetHere`). */
type FirstMeeting = FoundFile & { entry: FileEntry };

/**
 * The new files: a rename when a missing file had the same digest (its entry moves), or a new
 * entry; resolves with the first meetings with another device's text at that path (for
 * `meetHere`).
 */
function placeAdded(
  mirror: FolderMirror,
  added: FoundFile[],
  missing: Map<string, DiskRecord>,
  changes: Map<string, DiskRecord | null>,
  now: number,
): FirstMeeting[] {
  const met: FirstMeeting[] = [];
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
  return met;
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
  met: FirstMeeting[],
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
export function entryAt(
  mirror: FolderMirror,
  path: string,
  record: DiskRecord,
): FileEntry | undefined {
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
