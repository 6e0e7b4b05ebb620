import type { Disk } from './disk.ts';
import { writeAll } from './file-system.ts';
import type { FolderMirror } from './mirror.ts';

/** The file that tells a folder from an empty mount point (a dot file: never synced). */
export const folderMarker = '.sync-host-folder';
const markerText =
  'This folder is kept in step by sync-host sync. Without this file, sync takes the folder for\n' +
  'one that is not mounted and changes nothing.\n';

/** Writes the marker at a folder's first start (left as it is when there). */
export function writeMarker(disk: Disk): void {
  let fd: number;
  try {
    fd = disk.fs.open(disk.at(folderMarker), 'create', 0o644);
  } catch {
    return; // already there (or the folder is not: the scan says so)
  }
  try {
    writeAll(disk.fs, fd, Buffer.from(markerText));
  } finally {
    disk.fs.close(fd);
  }
}

/**
 * Whether the folder itself is there: the folder, and in it the marker file written at the
 * first start. A folder that was removed, or a mount point whose disk is not mounted, is not
 * read as every file deleted: nothing is sent or written until it is back, one line says so.
 */
export function folderThere(mirror: FolderMirror, stateFile: string): boolean {
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
    `the folder ${dir} is gone or not mounted (its ${folderMarker} file is missing): nothing is sent or written until it is back (if it is, and only the file was deleted, create ${folderMarker} again; to start this folder afresh, stop sync and delete ${stateFile})`,
  );
  return false;
}
