import type { Stamp } from './disk.ts';
import { addEntry, addVersion, type FileEntry, newVersion } from './document.ts';
import type { FolderMirror } from './mirror.ts';
import { entryAt } from './scan.ts';
import type { DiskRecord } from './state-log.ts';

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
