import { moveToConflictName } from './conflicts.ts';
import { type Disk, type FileMeta, type Stamp, sameStamp } from './disk.ts';
import { type BlobVersion, digestOf, type FileEntry } from './document.ts';
import type { FolderMirror } from './mirror.ts';
import type { ReceiveBudget } from './receive-budget.ts';
import type { DiskRecord, PendingOp } from './state-log.ts';

/** What the writer records: disk record changes, the batch it is about to make, its end. */
export type Persist = (record: {
  disk?: Map<string, DiskRecord | null>;
  pending?: PendingOp[];
  done?: boolean;
}) => void;

/**
 * Makes the folder what the folder document says at the given paths: plans the writes and
 * removes, records them (temporary files already written), then puts them in place, each
 * checked against a change made here in between. Resolves with how many new files the receive
 * budget held back and whether a write waited for a file of this batch to leave its way.
 */
export function writeFolder(
  mirror: FolderMirror,
  paths: Iterable<string>,
  budget: ReceiveBudget,
  persist: Persist,
  onRecorded: (() => void) | undefined,
): { held: number; blocked: boolean } {
  const batch = planBatch(mirror, paths);
  const { held, blocked } = prepareWrites(mirror, batch, budget);
  const { plan, changes } = batch;
  if (plan.length === 0) {
    if (changes.size > 0) {
      mirror.setRecords(changes);
      persist({ disk: changes });
    }
    return { held, blocked };
  }
  commitBatch(mirror, batch, persist, onRecorded);
  return { held, blocked };
}

/** A batch of a write: the operations planned, the records they change, the files to write. */
interface Batch {
  plan: PendingOp[];
  changes: Map<string, DiskRecord | null>;
  writes: [string, FileEntry][];
}

/**
 * What the paths need: a remove (the entry deleted), a write (another version won), times and
 * modes set in place, or nothing; a bad entry from another device keeps the file as a new one.
 */
function planBatch(mirror: FolderMirror, paths: Iterable<string>): Batch {
  const { onDisk, index } = mirror;
  const plan: PendingOp[] = [];
  const changes = new Map<string, DiskRecord | null>();
  const writes: [string, FileEntry][] = [];
  for (const path of paths) {
    // Ignored here: another device's version waits in the document, the file here stays as is.
    if (mirror.ignores(path)) continue;
    const record = onDisk.get(path);
    const winner = index.winnerAt(path);
    if (winner === undefined) {
      if (record === undefined) continue;
      const entry = index.get(record.id);
      if (typeof entry !== 'object') {
        // Not a delete (a delete keeps the entry and marks it): another device broke or removed
        // the entry. The file stays, and is read again as a file of its own, sent anew.
        const why = entry ?? 'the entry was removed';
        mirror.sayOnce(
          `bad ${record.id}`,
          `kept ${path}: another device sent a bad entry for it (${why}); it is sent again as a new file`,
        );
        changes.set(path, null);
        mirror.readLater(path);
        continue;
      }
      plan.push({ op: 'remove', path, before: record.digest });
      changes.set(path, null);
    } else if (record?.id !== winner.id || record.digest !== index.digest(winner.id)) {
      writes.push([path, winner]);
    } else if (mirror.metaDiffers(path, winner)) {
      const stamped = metaInPlace(mirror, path, winner);
      if (stamped !== undefined) changes.set(path, stamped);
    }
  }
  return { plan, changes, writes };
}

/**
 * The temporary file of each write, added to the plan; a write that cannot be made now is
 * retried later. How many new files the receive budget held back, and whether a write waited
 * for a file of this batch to leave its way.
 */
function prepareWrites(
  mirror: FolderMirror,
  batch: Batch,
  budget: ReceiveBudget,
): { held: number; blocked: boolean } {
  const { disk, onDisk } = mirror;
  // The temporary files of the texts are created all at once (parallel-create.ts); of the
  // new ones, no more than the receive limits let through now.
  let newLeft = budget.filesLeft();
  disk.prepareTemps(
    batch.writes
      .filter(([path, entry]) => {
        if (entry.text === undefined || mirror.isSkippedHere(path)) return false;
        if (mirror.blobs?.sending(path) === true) return false;
        return onDisk.has(path) || newLeft-- > 0;
      })
      .map(([path]) => path),
  );
  try {
    return prepareEach(mirror, batch, budget);
  } finally {
    disk.dropPreparedTemps();
  }
}

/** `prepareWrites` for each write of the batch in turn. */
function prepareEach(
  mirror: FolderMirror,
  batch: Batch,
  budget: ReceiveBudget,
): { held: number; blocked: boolean } {
  const { disk, onDisk, index } = mirror;
  const { plan, changes, writes } = batch;
  let held = 0;
  let blocked = false;
  for (const [path, entry] of writes) {
    const record = onDisk.get(path);
    if (mirror.isSkippedHere(path)) {
      mirror.sayOnce(
        `here ${path}`,
        `not written ${path}: a file here that does not sync has that name`,
      );
      continue;
    }
    if (mirror.blobs?.sending(path)) {
      // Changed here and being sent: its version goes in first, then the two are settled.
      mirror.retryLater(path);
      continue;
    }
    let here = disk.statFile(path);
    // An empty folder of this device's own (left by a rename) holds nothing: it gives way.
    if (here !== undefined && 'problem' in here && disk.removeEmptyFolder(path)) {
      here = disk.statFile(path);
    }
    if (here !== undefined && 'problem' in here) {
      mirror.retryLater(path);
      mirror.sayOnce(`here ${path} ${here.problem}`, `not written ${path}: ${here.problem}`);
      continue;
    }
    const meta = mirror.writeMeta(entry, here);
    const temp = tempOf(mirror, path, entry, meta, record === undefined ? budget : undefined);
    if (temp === 'held') {
      held += 1;
      mirror.retryLater(path);
      continue;
    }
    if (temp === undefined) continue;
    if ('problem' in temp) {
      mirror.retryLater(path);
      if (plan.some((op) => op.op === 'remove' && path.startsWith(`${op.path}/`))) blocked = true;
      else mirror.sayOnce(`write ${path} ${temp.problem}`, `not written ${path}: ${temp.problem}`);
      continue;
    }
    const after = index.digest(entry.id)!;
    plan.push({ op: 'write', path, temp: temp.temp, before: record?.digest ?? null, after });
    const kept = temp.stamp === undefined ? {} : { stamp: temp.stamp };
    changes.set(path, { id: entry.id, digest: after, ...kept });
  }
  return { held, blocked };
}

/**
 * The batch recorded, then put in place operation by operation; one that meets a change made
 * here meanwhile (or fails) is retried later and its record put back.
 */
function commitBatch(
  mirror: FolderMirror,
  batch: Batch,
  persist: Persist,
  onRecorded: (() => void) | undefined,
): void {
  const { onDisk } = mirror;
  const { plan, changes } = batch;
  persist({ disk: changes, pending: plan });
  onRecorded?.();
  const corrections = new Map<string, DiskRecord | null>();
  for (const op of plan) {
    const previous = onDisk.get(op.path) ?? null;
    const problem = op.op === 'write' ? commitWrite(mirror, op) : commitRemove(mirror, op);
    if (problem === 'merge') {
      mirror.retryLater(op.path);
      corrections.set(op.path, previous);
    } else if (problem !== undefined) {
      mirror.sayOnce(`commit ${op.path} ${problem}`, `not written ${op.path}: ${problem}`);
      mirror.retryLater(op.path);
      corrections.set(op.path, previous);
    }
  }
  mirror.setRecords(changes);
  mirror.setRecords(corrections);
  persist({ disk: corrections, done: true });
}

/**
 * A file here with the content of its entry and another time or mode (a `chmod` or `touch` on
 * another device): both are set on it, when it is still as it was last read or written here
 * (else it is read first). The changed record, when it keeps a stamp.
 */
function metaInPlace(mirror: FolderMirror, path: string, entry: FileEntry): DiskRecord | undefined {
  const here = mirror.disk.statFile(path);
  if (here === undefined || 'problem' in here || !sameStamp(here, mirror.stampOf(path))) {
    mirror.readLater(path);
    return undefined;
  }
  const stamp = mirror.disk.setMeta(path, mirror.writeMeta(entry, here));
  if ('problem' in stamp) {
    mirror.sayOnce(`meta ${path} ${stamp.problem}`, `not changed ${path}: ${stamp.problem}`);
    return undefined;
  }
  mirror.setStamp(path, stamp);
  if (entry.mode !== undefined && mirror.perms && entry.mode !== here.mode) {
    mirror.say('out', `received ${path} (mode ${entry.mode.toString(8)})`);
  }
  const record = mirror.onDisk.get(path);
  return record?.stamp === undefined ? undefined : { ...record, stamp };
}

/** Whether the file at `path` is still what this process last read or wrote there. */
function unchangedHere(mirror: FolderMirror, path: string): boolean {
  const stamp = mirror.disk.statFile(path);
  const record = mirror.onDisk.get(path);
  if (stamp === undefined) return record === undefined;
  if ('problem' in stamp || record === undefined) return false;
  if (sameStamp(stamp, mirror.stampOf(path))) return true;
  return mirror.disk.fileDigest(path) === record.digest;
}

/**
 * The temporary file with the content `entry` gives `path`: written now for a text, downloaded
 * for a blob (undefined while it is fetched). A new file first takes its size from `budget`
 * ('held' when over it; a download under way has its share already). A downloaded file keeps
 * its temporary file's stamp when it is put in place (a rename): it goes in the disk record.
 */
function tempOf(
  mirror: FolderMirror,
  path: string,
  entry: FileEntry,
  meta: FileMeta,
  budget: ReceiveBudget | undefined,
): { temp: string; stamp?: Stamp } | { problem: string } | 'held' | undefined {
  const content = entry.text?.toString();
  const version = entry.blob!;
  const size = content === undefined ? version.size : Buffer.byteLength(content);
  const fetching = content === undefined && mirror.blobs?.wants(path, version.v) === true;
  if (budget !== undefined && !fetching && !budget.take(size)) return 'held';
  if (content !== undefined) return mirror.disk.writeTemp(path, content, { meta });
  const temp = blobTemp(mirror, path, version);
  if (temp === undefined) return undefined;
  // The time and mode go on the temporary file: the rename keeps them, and its stamp is the file's.
  const stamp = mirror.disk.setMeta(temp.temp, meta);
  return 'problem' in stamp ? temp : { ...temp, stamp };
}

/**
 * The downloaded file of a blob version, ready to be put in place; undefined while it is
 * fetched (the download's end brings the path back here), or when nothing fetches files.
 */
function blobTemp(
  mirror: FolderMirror,
  path: string,
  version: BlobVersion,
): { temp: string } | undefined {
  const { blobs } = mirror;
  if (blobs === undefined) {
    mirror.sayOnce(`blob ${path}`, `not written ${path}: a file kept as chunks (not fetched here)`);
    return undefined;
  }
  const temp = blobs.take(path, version.v);
  if (temp !== undefined) return { temp };
  blobs.want(path, version);
  return undefined;
}

/** Whether the file at `path` holds text that merges (not binary, not too large). */
function isText(mirror: FolderMirror, path: string): boolean {
  const read = mirror.disk.readText(path);
  return read !== undefined && 'text' in read;
}

/**
 * Puts a write's temporary file in place; a problem, or 'merge' when the file is a text edited
 * here meanwhile (left as it is, to be read and merged first).
 */
function commitWrite(
  mirror: FolderMirror,
  op: Extract<PendingOp, { op: 'write' }>,
): string | undefined {
  const { disk } = mirror;
  const here = disk.statFile(op.path);
  if (here !== undefined && 'problem' in here) {
    // A link, a folder or a special file of this device's own has the name: left alone.
    disk.removeQuietly(op.temp);
    return here.problem;
  }
  if (!unchangedHere(mirror, op.path) && here !== undefined) {
    if (mirror.bases.has(op.path) && isText(mirror, op.path)) {
      // A text file edited here since it was last read: not written over. It is read again,
      // merged three ways with the document from its base, and then written.
      disk.removeQuietly(op.temp);
      mirror.mergeLater(op.path);
      return 'merge';
    }
    // Written here between the last read and now: that version is kept beside it.
    const aside = moveToConflictName(disk, op.path, mirror.now(), mirror.device);
    if (aside === undefined) {
      disk.removeQuietly(op.temp);
      return 'changed here at the same moment, and could not be moved aside';
    }
    mirror.readLater(aside);
    mirror.say(
      'out',
      `kept ${op.path} as ${aside}: changed here while a change from another device arrived`,
    );
  }
  const stamp = disk.commitTemp(op.temp, op.path);
  if ('problem' in stamp) return stamp.problem;
  mirror.setStamp(op.path, stamp);
  mirror.setBase(op.path, null);
  mirror.say('out', `received ${op.path}`);
  return undefined;
}

function commitRemove(
  mirror: FolderMirror,
  op: Extract<PendingOp, { op: 'remove' }>,
): string | undefined {
  if (!unchangedHere(mirror, op.path)) {
    // Changed here since: the edit wins, and the next read sends it as a file of its own.
    mirror.forgetStamp(op.path);
    mirror.readLater(op.path);
    return undefined;
  }
  const problem = mirror.disk.removeFile(op.path);
  if (problem !== undefined) return problem;
  mirror.forgetStamp(op.path);
  mirror.say('out', `received ${op.path} (deleted)`);
  return undefined;
}

/**
 * The batch a killed process recorded and did not finish: a file still as it was gets the new
 * version; a text changed meanwhile whose base was kept stays as it is, to be read and merged
 * (`merge`: its path and the digest of its base); any other file changed meanwhile is moved to
 * a conflict copy first (read as a new file next). `lost`: the paths whose records no longer
 * hold (their rename failed).
 */
export function finishPending(
  disk: Disk,
  device: string,
  pending: PendingOp[],
  now: number,
  bases: Map<string, string>,
): { lost: string[]; merge: Map<string, string> } {
  const lost: string[] = [];
  const merge = new Map<string, string>();
  for (const op of pending) {
    const here = disk.statFile(op.path);
    const current = disk.fileDigest(op.path) ?? null;
    if (op.op === 'remove') {
      if (current === op.before) disk.removeFile(op.path);
      continue;
    }
    if (disk.statFile(op.temp) === undefined) continue; // put in place before the kill
    if (current !== op.before && current !== op.after && here !== undefined) {
      const base = bases.get(op.path);
      if (
        base !== undefined &&
        digestOf(base) === op.before &&
        'text' in (disk.readText(op.path) ?? {})
      ) {
        disk.removeQuietly(op.temp);
        merge.set(op.path, op.before);
        continue;
      }
      moveToConflictName(disk, op.path, now, device);
    }
    if ('problem' in disk.commitTemp(op.temp, op.path)) lost.push(op.path);
  }
  return { lost, merge };
}
