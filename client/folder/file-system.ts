import {
  closeSync,
  constants,
  fchmodSync,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  futimesSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { ParallelCreate } from './parallel-create.ts';

/**
 * The folder engine's seam to the file system: every disk operation of the engine (its folder,
 * its state log, its marker) goes through one of these calls, synchronous and shaped as
 * `node:fs`'s, failing as `node:fs` does (an error with its `code`: `ENOENT`, `EEXIST`,
 * `ENOTDIR`, `ELOOP`...). `nodeFileSystem` is the real one; the tests run the engine over an
 * in-memory one and over one that injects faults. Paths are absolute.
 */
export interface FileSystem {
  /** The entry at `path`, a link itself rather than what it points at. */
  lstat(path: string): FsStats;
  fstat(fd: number): FsStats;
  /**
   * `read`: an existing regular file, never through a link at the end of the path (`ELOOP`),
   * never blocking on a pipe; `create`: a new file (`EEXIST` when the name is taken, a link
   * included); `append`: created when missing; `replace`: created or emptied.
   */
  open(path: string, how: 'read' | 'create' | 'append' | 'replace', mode?: number): number;
  /** Bytes read into `buffer` at `offset`; from `position`, or from the file's place when null. */
  read(
    fd: number,
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number | null,
  ): number;
  /** Bytes written at the file's place (how many of them: a write may be short). */
  write(fd: number, data: Uint8Array, offset: number, length: number): number;
  /** To stable storage: the data (`dataOnly`), or the data and the metadata. */
  sync(fd: number, dataOnly: boolean): void;
  close(fd: number): void;
  /** A folder's entries, names as bytes (a name need not be valid UTF-8). */
  readdir(path: string): FsDirent[];
  readFile(path: string): Uint8Array;
  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): void;
  /** Removes an empty folder (`ENOTEMPTY` otherwise). */
  rmdir(path: string): void;
  unlink(path: string): void;
  /** Renames over an existing file. */
  rename(from: string, to: string): void;
  /** A second name for a file (`EEXIST` when taken). */
  link(from: string, to: string): void;
  /** Sets an open file's permission bits. */
  chmod(fd: number, mode: number): void;
  /** Sets an open file's modification (and access) time, in whole milliseconds. */
  setTimes(fd: number, mtimeMs: number): void;
  /**
   * Opens many new files as `open(path, 'create', mode)` does, at once where the file system
   * can (several threads); the descriptor of each, or undefined for one not created. Optional:
   * without it, files are created one by one.
   */
  createMany?(paths: string[], mode: number): (number | undefined)[];
}

export interface FsStats {
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  size: number;
  mtimeMs: number;
  ino: number;
  /** The type and permission bits (`& 0o777` for the permissions). */
  mode: number;
}

export interface FsDirent {
  name: Buffer;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}

const readFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const openFlags = { read: readFlags, create: 'wx', append: 'a', replace: 'w' } as const;

/** The threads that create the temporary files of a batch of writes (parallel-create.ts). */
const creator = new ParallelCreate();

/** The real file system, through `node:fs`. */
export const nodeFileSystem: FileSystem = {
  createMany: (paths, mode) => creator.createAll(paths, mode),
  lstat: (path) => lstatSync(path),
  fstat: (fd) => fstatSync(fd),
  open: (path, how, mode) => openSync(path, openFlags[how], mode),
  read: (fd, buffer, offset, length, position) => readSync(fd, buffer, offset, length, position),
  write: (fd, data, offset, length) => writeSync(fd, data, offset, length),
  sync: (fd, dataOnly) => (dataOnly ? fdatasyncSync(fd) : fsyncSync(fd)),
  close: (fd) => closeSync(fd),
  readdir: (path) => readdirSync(path, { withFileTypes: true, encoding: 'buffer' }),
  readFile: (path) => readFileSync(path),
  mkdir: (path, options) => {
    mkdirSync(path, options);
  },
  rmdir: (path) => rmdirSync(path),
  unlink: (path) => unlinkSync(path),
  rename: (from, to) => renameSync(from, to),
  link: (from, to) => linkSync(from, to),
  chmod: (fd, mode) => fchmodSync(fd, mode),
  setTimes: (fd, mtimeMs) => {
    // In seconds as a double, whose error near today's times is a quarter of a microsecond:
    // half a microsecond more keeps the file's time at or just past `mtimeMs`, never below it
    // (a time read back and cut to milliseconds is the one given).
    const seconds = mtimeMs / 1000 + 5e-7;
    futimesSync(fd, seconds, seconds);
  },
};

/** Writes all of `data` (a write may be short). */
export function writeAll(fs: FileSystem, fd: number, data: Uint8Array): void {
  let offset = 0;
  while (offset < data.length) offset += fs.write(fd, data, offset, data.length - offset);
}

/** The error code of a failed call, or undefined. */
export function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}
