import type { Disk } from './disk.ts';
import { writeAll } from './file-system.ts';
import type { FolderMirror } from './mirror.ts';

/** The file that tells a folder from an empty mount point (a dot file: never synced). */
export const folderMarker = '.sync-host-folder';
const markerText =
  'This folder is kept in step by sync-host sync. Without this file, sync takes the folder for\n' +
  'one that is not mounted and changes nothing.\n';

const idPrefix = 'folder id: ';

/** Writes the marker with the folder's id: made anew, or (`replace`) over the one there. */
export function writeMarker(disk: Disk, id: string, replace = false): void {
  let fd: number;
  try {
    fd = disk.fs.open(disk.at(folderMarker), replace ? 'replace' : 'create', 0o644);
  } catch {
    return; // already there (or the folder is not: the scan says so)
  }
  try {
    writeAll(disk.fs, fd, Buffer.from(`${markerText}${idPrefix}${id}\n`));
  } finally {
    disk.fs.close(fd);
  }
}

/** The id in the folder's marker: undefined for a marker without one, null when there is none. */
export function markerId(disk: Disk): string | undefined | null {
  let text: string;
  try {
    text = Buffer.from(disk.fs.readFile(disk.at(folderMarker))).toString('utf8');
  } catch {
    return null;
  }
  const line = text.split('\n').find((l) => l.startsWith(idPrefix));
  return line?.slice(idPrefix.length).trim();
}

/**
 * Whether the folder itself is there: the folder, and in it the marker file written at the
 * first start. A folder that was removed, or a mount point whose disk is not mounted, is not
 * read as every file deleted: nothing is sent or written until it is back, one line says so.
 */
export function folderThere(mirror: FolderMirror): boolean {
  const { dir, disk } = mirror;
  try {
    if (disk.fs.lstat(dir).isDirectory() && disk.fs.lstat(disk.at(folderMarker)).isFile()) {
      mirror.unsay('folder gone');
      return true;
    }
  } catch {
    // Said below.
  }
  mirror.sayOnce(
    'folder gone',
    `the folder ${dir} is gone or not mounted (its ${folderMarker} file is missing): nothing is sent or written until it is back (to bring the files back, restore them from the host with sync-host restore <project> --all, or copy them from another device; creating ${folderMarker} again starts the folder afresh: files here are read as new and files missing are written back from the other devices, nothing is deleted anywhere)`,
  );
  return false;
}
