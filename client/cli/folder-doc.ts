import { createHash, randomBytes } from 'node:crypto';
import * as Y from 'yjs';
import { pathProblem } from './folder-names.ts';

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
