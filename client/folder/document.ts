import { createHash, randomBytes } from 'node:crypto';
import * as Y from 'yjs';
import { pathProblem } from './names.ts';

/**
 * The folder document: what `sync-host sync` keeps in step. Its `files` map holds one entry per
 * file, under a random id that never changes (so a rename is one field, and two devices that
 * create the same name make two entries instead of one overwriting the other):
 *
 * - `path`: the file's relative path (`/`-separated), checked by `pathProblem` on every device;
 * - `text`: for a text file (UTF-8, no NUL byte, at most 1 MiB), a `Y.Text` with the content;
 *   edits merge character by character;
 * - `blob`: for every other file, a `Y.Map` of versions by version id (see `BlobVersion`): the
 *   file's bytes are chunks the host keeps, the version lists them. A device that changes the
 *   file adds its version, saying which it replaced, and removes that one; so the map holds one
 *   version, and two when two devices changed the file apart (neither saw the other's). Then the
 *   most recent edit keeps the entry and the name, and every device moves the other version to
 *   an entry of its own under the conflict name (`blobSplitId`: the same id on every device);
 * - `time`, `device`: when and where the entry was made (the newer of two entries with one path
 *   keeps the name; the other's conflict copy is named by its own); for a blob, those of its
 *   current version;
 * - `mtime`, `mode`: for a text file, its modification time (whole milliseconds) and permission
 *   bits (`0o777` at most) as last read on the device that last changed it; every device writes
 *   the file with them. A blob version carries its own. Absent in entries of older versions
 *   (and `mode` from a device with `--no-perms`): the file is then written as before;
 * - `deleted`: absent for a live file; a delete stores the digest of the content it removed. The
 *   file stays deleted while its content has that digest: an edit made anywhere meanwhile (on a
 *   device that had not seen the delete) changes it, and the file is back with that edit on
 *   every device. The content stays in the document (for a blob, its chunk list).
 *
 * A file whose kind changes (a text file grown past 1 MiB, a binary file made text) is a delete
 * of its entry and a new entry of the other kind at the same path.
 */
export const folderDocName = 'files';

/** One version of a file kept as chunks; a plain value, never changed once set. */
export interface BlobVersion {
  /** Random id of this version. */
  v: string;
  size: number;
  /** SHA-256 of the whole file, hex. */
  digest: string;
  /** The chunks in order: id on the host and plaintext size. */
  chunks: [string, number][];
  time: number;
  device: string;
  /** The version this one replaced (null for the first). */
  replaces: string | null;
  /** The file's modification time, whole milliseconds (absent in older versions). */
  mtime?: number;
  /** The file's permission bits (absent in older versions, or from `--no-perms`). */
  mode?: number;
}

export interface FileEntry {
  id: string;
  map: Y.Map<unknown>;
  path: string;
  /** The content of a text file; undefined for a blob. */
  text: Y.Text | undefined;
  /** The current version of a blob: the most recent edit of those not replaced. */
  blob: BlobVersion | undefined;
  /** For a blob, every version not replaced, the current one first (several: a conflict). */
  heads: BlobVersion[];
  time: number;
  device: string;
  deleted: string | undefined;
  /** The file's modification time and permission bits (for a blob, its current version's). */
  mtime: number | undefined;
  mode: number | undefined;
}

/** A modification time another device sent, when it is one (whole milliseconds). */
export function validMtime(value: unknown): number | undefined {
  return Number.isSafeInteger(value) ? (value as number) : undefined;
}

/** Permission bits another device sent, when they are some (setuid and the like never are). */
export function validMode(value: unknown): number | undefined {
  return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 0o777
    ? (value as number)
    : undefined;
}

/** The digest of a file's content that deletes and the disk records compare. */
export function digestOf(content: string | Uint8Array): string {
  return createHash('sha256').update(content).digest('hex').slice(0, 32);
}

/** The same digest of a blob version (the start of its SHA-256). */
export function blobDigest(version: BlobVersion): string {
  return version.digest.slice(0, 32);
}

/** The digest of an entry's current content (what a delete of it records). */
export function entryDigest(entry: FileEntry): string {
  return entry.text === undefined ? blobDigest(entry.blob!) : digestOf(entry.text.toString());
}

/** Whether the entry is a file that exists: not deleted, or edited since its delete. */
export function entryLive(entry: FileEntry): boolean {
  return entry.deleted === undefined || entry.deleted !== entryDigest(entry);
}

export function newEntryId(): string {
  return randomBytes(12).toString('hex');
}

/** Largest file a version may claim (a bound for values from other devices). */
const maxBlobBytes = 2 ** 50;

/** The version in `value`, or undefined when another device sent something unusable. */
function versionOf(v: string, value: unknown): BlobVersion | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { size, digest, chunks, time, device, replaces } = value as Record<string, unknown>;
  if (!Number.isSafeInteger(size) || (size as number) < 0 || (size as number) > maxBlobBytes)
    return undefined;
  if (typeof digest !== 'string' || !/^[0-9a-f]{64}$/.test(digest)) return undefined;
  if (typeof time !== 'number' || !Number.isFinite(time)) return undefined;
  if (typeof device !== 'string' || device === '') return undefined;
  if (replaces !== null && typeof replaces !== 'string') return undefined;
  if (!Array.isArray(chunks)) return undefined;
  let total = 0;
  for (const chunk of chunks as unknown[]) {
    if (!Array.isArray(chunk) || typeof chunk[0] !== 'string' || chunk[0].length > 100)
      return undefined;
    if (!Number.isSafeInteger(chunk[1]) || chunk[1] <= 0) return undefined;
    total += chunk[1] as number;
  }
  if (total !== size) return undefined;
  const version = { v, size, digest, chunks, time, device, replaces } as BlobVersion;
  // A time or mode that is not one is left out: the file is written as without them.
  const { mtime, mode } = value as Record<string, unknown>;
  if (validMtime(mtime) !== undefined) version.mtime = mtime as number;
  if (validMode(mode) !== undefined) version.mode = mode as number;
  return version;
}

/** Most recent edit first; the version id breaks ties, so every device picks the same. */
export function newestVersionFirst(a: BlobVersion, b: BlobVersion): number {
  return b.time - a.time || (a.v < b.v ? 1 : a.v > b.v ? -1 : 0);
}

/** The versions of a blob map not replaced by another one there, the current one first. */
function headsOf(blob: Y.Map<unknown>): BlobVersion[] {
  const versions: BlobVersion[] = [];
  for (const [v, value] of blob) {
    const version = versionOf(v, value);
    if (version !== undefined) versions.push(version);
  }
  const replaced = new Set(versions.map((version) => version.replaces));
  return versions.filter((version) => !replaced.has(version.v)).sort(newestVersionFirst);
}

/** The entry under `id`, or why it cannot be used (a value another device got wrong). */
export function entryOf(id: string, value: unknown): FileEntry | string {
  if (!(value instanceof Y.Map)) return 'the entry is not a map';
  const map = value as Y.Map<unknown>;
  const path = map.get('path');
  const text = map.get('text');
  const blob = map.get('blob');
  let time = map.get('time');
  let device = map.get('device');
  const deleted = map.get('deleted');
  const problem = pathProblem(path);
  if (problem !== undefined) return problem;
  const heads = blob instanceof Y.Map ? headsOf(blob as Y.Map<unknown>) : [];
  if (!(text instanceof Y.Text) && heads.length === 0)
    return 'its content is neither text nor a file';
  if (typeof time !== 'number' || !Number.isFinite(time)) return 'its time is not a number';
  if (typeof device !== 'string' || device === '') return 'its device is not a string';
  if (deleted !== undefined && typeof deleted !== 'string')
    return 'its delete mark is not a string';
  const current = text instanceof Y.Text ? undefined : heads[0];
  if (current !== undefined) {
    time = current.time;
    device = current.device;
  }
  return {
    id,
    map,
    path: path as string,
    text: text instanceof Y.Text ? text : undefined,
    blob: current,
    heads: current === undefined ? [] : heads,
    time: time as number,
    device: device as string,
    deleted: deleted as string | undefined,
    mtime: current === undefined ? validMtime(map.get('mtime')) : current.mtime,
    mode: current === undefined ? validMode(map.get('mode')) : current.mode,
  };
}

/**
 * Sets a text entry's modification time and permission bits (inside the caller's transaction),
 * each only when given and different from what the entry has.
 */
export function setTextMeta(map: Y.Map<unknown>, meta: { mtime?: number; mode?: number }): void {
  if (meta.mtime !== undefined && map.get('mtime') !== meta.mtime) map.set('mtime', meta.mtime);
  if (meta.mode !== undefined && map.get('mode') !== meta.mode) map.set('mode', meta.mode);
}

/** Adds a new file entry (inside the caller's transaction); its id. */
export function addEntry(
  files: Y.Map<unknown>,
  fields: {
    path: string;
    content: string | BlobVersion;
    device: string;
    time: number;
    /** For a text, the file's time and mode (a blob version carries its own). */
    meta?: { mtime?: number; mode?: number };
  },
  id = newEntryId(),
): string {
  const map = new Y.Map<unknown>();
  map.set('path', fields.path);
  if (typeof fields.content === 'string') {
    map.set('text', new Y.Text(fields.content));
    // Set before the map is in the document (which a read of it would need).
    const { mtime, mode } = fields.meta ?? {};
    if (mtime !== undefined) map.set('mtime', mtime);
    if (mode !== undefined) map.set('mode', mode);
  } else {
    const blob = new Y.Map<unknown>();
    blob.set(fields.content.v, fields.content);
    map.set('blob', blob);
  }
  map.set('time', fields.time);
  map.set('device', fields.device);
  files.set(id, map);
  return id;
}

/**
 * A new version of a blob entry's file (inside a transaction): replacing its current one, or,
 * when made from an older one than the entry has now, beside it (a conflict every device
 * settles the same way: the most recent edit keeps the name).
 */
export function addVersion(entry: FileEntry, version: BlobVersion, replace: boolean): void {
  const blob = entry.map.get('blob') as Y.Map<unknown>;
  const replaces = replace ? (entry.blob?.v ?? null) : null;
  if (replaces !== null) blob.delete(replaces);
  blob.set(version.v, { ...version, replaces });
}

/** A version's fields for a file just uploaded (with its time and mode when known). */
export function newVersion(
  file: {
    size: number;
    digest: string;
    chunks: [string, number][];
    mtime?: number;
    mode?: number;
  },
  device: string,
  time: number,
): BlobVersion {
  const { size, digest, chunks, mtime, mode } = file;
  const version: BlobVersion = {
    size,
    digest,
    chunks,
    v: newEntryId(),
    time,
    device,
    replaces: null,
  };
  if (mtime !== undefined) version.mtime = mtime;
  if (mode !== undefined) version.mode = mode;
  return version;
}
