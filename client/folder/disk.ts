import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { codeOf, type FileSystem, type FsStats, nodeFileSystem, writeAll } from './file-system.ts';
import { parentsOf, pathProblem } from './names.ts';

/**
 * The folder sync's only ways to touch its folder (`Disk`, over a `FileSystem`). Every path is
 * relative to the folder and has passed `pathProblem`; every folder above it is checked with
 * `lstat` to be a real folder (a symbolic link there is refused, never followed), files are
 * opened with `O_NOFOLLOW`, and a write goes whole through a temporary file beside its target,
 * created with `O_EXCL`.
 */

/** Text files larger than this are blobs (kept as chunks, not merged). */
export const maxTextBytes = 1_048_576;
/** The suffix of temporary files; a dot file, so never synced; left ones are removed at start. */
export const tempSuffix = '.sync-host-tmp';
/** The start of sync-host's own names in the folder (the marker `.sync-host-folder`). */
const ownPrefix = '.sync-host';

/**
 * What identifies one version of a file on disk without reading it; its permission bits too,
 * so that a change of mode alone is read (a stamp kept by an older version has none: the file
 * is read once more).
 */
export interface Stamp {
  size: number;
  mtimeMs: number;
  ino: number;
  /** The permission bits (`mode & 0o777`). */
  mode: number;
}

export function stampOf(stats: FsStats): Stamp {
  return { size: stats.size, mtimeMs: stats.mtimeMs, ino: stats.ino, mode: stats.mode & 0o777 };
}

export function sameStamp(a: Stamp | undefined, b: Stamp | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ino === b.ino &&
    a.mode === b.mode
  );
}

/**
 * A file's modification time (whole milliseconds) and permission bits, as entries keep them;
 * either may be absent (an entry from an older version, `--no-perms`): it is then left as the
 * write makes it.
 */
export interface FileMeta {
  mtime?: number;
  mode?: number;
}

/** The modification time an entry keeps of a stamp: whole milliseconds, cut (as `ls` shows). */
export function mtimeOf(stamp: Stamp): number {
  return Math.floor(stamp.mtimeMs);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export type ReadResult =
  | { text: string; stamp: Stamp }
  | { binary: Stamp }
  | { problem: string }
  | undefined;

/** What a walk of the folder found. */
export interface Walk {
  /** Regular files whose names sync, by path. */
  files: Map<string, Stamp>;
  /** Folders that could not be read: nothing under them counts as deleted. */
  unreadable: string[];
  /** Leftover temporary files. */
  temps: string[];
  /** Names that do not sync (links, special files, bad names), with why. */
  skipped: Map<string, string>;
}

const nameDecoder = new TextDecoder('utf-8', { fatal: true });

/** Whether `path` is `scope` or inside it (`''` is the whole folder). */
export function isWithin(path: string, scope: string): boolean {
  return scope === '' || path === scope || path.startsWith(`${scope}/`);
}

/**
 * A test of whether a path is within any of `scopes` (see `isWithin`) that costs the depth of
 * the path, not the number of scopes: a scan of the 10,000 files the watcher named looks at
 * every recorded file once, not 10,000 times.
 */
export function withinAny(scopes: Iterable<string>): (path: string) => boolean {
  const set = new Set(scopes);
  if (set.has('')) return () => true;
  return (path) => {
    for (let at = path.length; at > 0; at = path.lastIndexOf('/', at - 1)) {
      if (set.has(at === path.length ? path : path.slice(0, at))) return true;
    }
    return false;
  };
}

/** Whether a path stays on this device (`.syncignore`, dot files): see syncignore.ts. */
export type IgnoreTest = (path: string, isFolder: boolean) => boolean;

/** A new temporary file's name beside `path`: `.<name>.<random>.sync-host-tmp`. */
function tempNameOf(path: string): string {
  const slash = path.lastIndexOf('/');
  const base = path.slice(slash + 1).slice(0, 60);
  return `${path.slice(0, slash + 1)}.${base}.${randomBytes(4).toString('hex')}${tempSuffix}`;
}

/** Below this many files a batch creates its temporary files one by one (`prepareTemps`). */
const createManyFrom = 32;

/** The folder on a file system: every operation the engine makes on its files. */
export class Disk {
  /** Temporary files made ahead for the writes of a batch (`prepareTemps`), by path. */
  #prepared = new Map<string, { temp: string; fd: number }>();

  constructor(
    readonly root: string,
    readonly fs: FileSystem = nodeFileSystem,
  ) {}

  /** The absolute path of `path` (relative to the folder). */
  at(path: string): string {
    return path === '' ? this.root : join(this.root, path);
  }

  /** Why the folders above `path` cannot be used, 'missing' when one does not exist yet. */
  parentProblem(path: string): string | 'missing' | undefined {
    for (const parent of parentsOf(path)) {
      let stats: FsStats;
      try {
        stats = this.fs.lstat(this.at(parent));
      } catch (err: unknown) {
        if (codeOf(err) === 'ENOENT') return 'missing';
        return `${parent} cannot be read (${codeOf(err) ?? String(err)})`;
      }
      if (stats.isSymbolicLink()) return `${parent} is a symbolic link here (not followed)`;
      if (!stats.isDirectory()) return `${parent} is a file here, not a folder`;
    }
    return undefined;
  }

  /**
   * A text file's content; `binary` (unread past the first NUL or bad byte) for any other regular
   * file, a blob; undefined when it is not there; a problem when it cannot be read.
   */
  readText(path: string): ReadResult {
    if (pathProblem(path) !== undefined) return { problem: 'not a name that syncs' };
    const parents = this.parentProblem(path);
    if (parents === 'missing') return undefined;
    if (parents !== undefined) return { problem: parents };
    let fd: number;
    try {
      fd = this.fs.open(this.at(path), 'read');
    } catch (err: unknown) {
      const code = codeOf(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      if (code === 'ELOOP') return { problem: 'a symbolic link (not followed)' };
      return { problem: `cannot be read (${code ?? String(err)})` };
    }
    try {
      const stats = this.fs.fstat(fd);
      if (!stats.isFile()) return { problem: 'not a regular file' };
      if (stats.size > maxTextBytes) return { binary: stampOf(stats) };
      const bytes = Buffer.alloc(stats.size);
      let offset = 0;
      while (offset < bytes.length) {
        const read = this.fs.read(fd, bytes, offset, bytes.length - offset, offset);
        if (read === 0) break;
        offset += read;
      }
      const content = bytes.subarray(0, offset);
      if (content.includes(0)) return { binary: stampOf(stats) };
      try {
        return { text: utf8.decode(content), stamp: stampOf(stats) };
      } catch {
        return { binary: stampOf(stats) };
      }
    } catch (err: unknown) {
      return { problem: `cannot be read (${codeOf(err) ?? String(err)})` };
    } finally {
      this.fs.close(fd);
    }
  }

  /** The stamp of the regular file at `path`; undefined when absent; a problem otherwise. */
  statFile(path: string): Stamp | { problem: string } | undefined {
    const parents = this.parentProblem(path);
    if (parents === 'missing') return undefined;
    if (parents !== undefined) return { problem: parents };
    try {
      const stats = this.fs.lstat(this.at(path));
      if (stats.isSymbolicLink()) return { problem: 'a symbolic link here (not replaced)' };
      if (!stats.isFile()) return { problem: 'a folder or special file here' };
      return stampOf(stats);
    } catch (err: unknown) {
      if (codeOf(err) === 'ENOENT' || codeOf(err) === 'ENOTDIR') return undefined;
      return { problem: `cannot be read (${codeOf(err) ?? String(err)})` };
    }
  }

  /**
   * Creates the folders above `path` one by one (only checks them without `make`); a problem when
   * one is a link or a file, or missing and not to be made.
   */
  private makeParents(path: string, make = true): string | undefined {
    for (const parent of parentsOf(path)) {
      const full = this.at(parent);
      try {
        const stats = this.fs.lstat(full);
        if (stats.isSymbolicLink()) return `${parent} is a symbolic link here (not followed)`;
        if (!stats.isDirectory()) return `${parent} is a file here, not a folder`;
      } catch (err: unknown) {
        if (codeOf(err) !== 'ENOENT') return `${parent} cannot be read (${codeOf(err)})`;
        if (!make) return `${parent} is not there`;
        try {
          this.fs.mkdir(full);
        } catch (mkdirErr: unknown) {
          if (codeOf(mkdirErr) !== 'EEXIST')
            return `${parent} cannot be made (${codeOf(mkdirErr)})`;
          return this.makeParents(path, make); // made meanwhile: check it again
        }
      }
    }
    return undefined;
  }

  /**
   * Writes `content` whole into a new temporary file beside `path` (the folders above made as
   * needed, or, with `makeFolders: false`, required to be there); resolves with its relative
   * path, or why it cannot be written.
   */
  writeTemp(
    path: string,
    content: string,
    options: { makeFolders?: boolean; meta?: FileMeta } = {},
  ): { temp: string; ino: number } | { problem: string } {
    if (pathProblem(path) !== undefined) return { problem: 'not a name that syncs' };
    const prepared = this.#prepared.get(path);
    this.#prepared.delete(path);
    let temp: string;
    let fd: number;
    if (prepared !== undefined) {
      ({ temp, fd } = prepared);
    } else {
      const parents = this.makeParents(path, options.makeFolders ?? true);
      if (parents !== undefined) return { problem: parents };
      temp = tempNameOf(path);
      try {
        fd = this.fs.open(this.at(temp), 'create', 0o644);
      } catch (err: unknown) {
        return { problem: `cannot be written (${codeOf(err) ?? String(err)})` };
      }
    }
    try {
      // A folder above swapped for a link between the check and the create puts the new file
      // wherever the link points: checked again before a byte is written, and removed.
      const moved = this.createdInside(temp, fd);
      if (moved !== undefined) {
        this.removeQuietly(temp);
        return { problem: moved };
      }
      writeAll(this.fs, fd, Buffer.from(content, 'utf8'));
      if (options.meta !== undefined) this.applyMeta(fd, options.meta);
      return { temp, ino: this.fs.fstat(fd).ino };
    } catch (err: unknown) {
      this.removeQuietly(temp);
      return { problem: `cannot be written (${codeOf(err) ?? String(err)})` };
    } finally {
      this.fs.close(fd);
    }
  }

  /**
   * Creates the temporary files of `paths` (text files a batch is about to write, the folders
   * above made as `writeTemp` makes them) all at once where the file system can, for
   * `writeTemp` to take; the ones it does not take are removed by `dropPreparedTemps`. A path
   * whose file could not be made ahead is made by `writeTemp` as usual, which says why when
   * that fails too. Fewer than 32 paths: nothing is made ahead.
   */
  prepareTemps(paths: string[]): void {
    const { createMany } = this.fs;
    if (createMany === undefined || paths.length < createManyFrom) return;
    const wanted: string[] = [];
    const temps: string[] = [];
    for (const path of paths) {
      if (this.#prepared.has(path) || pathProblem(path) !== undefined) continue;
      if (this.makeParents(path) !== undefined) continue;
      wanted.push(path);
      temps.push(tempNameOf(path));
    }
    const fds = createMany.call(
      this.fs,
      temps.map((temp) => this.at(temp)),
      0o644,
    );
    fds.forEach((fd, i) => {
      if (fd !== undefined) this.#prepared.set(wanted[i]!, { temp: temps[i]!, fd });
    });
  }

  /** Removes the temporary files made ahead that no write took. */
  dropPreparedTemps(): void {
    for (const { temp, fd } of this.#prepared.values()) {
      try {
        this.fs.close(fd);
      } catch {
        // closed already: the file is removed all the same
      }
      this.removeQuietly(temp);
    }
    this.#prepared.clear();
  }

  /**
   * Why the file just created at `temp` (open as `fd`) may not be inside the folder: a folder
   * above it is no longer a real folder, or the name leads to another file than the one created.
   */
  private createdInside(temp: string, fd: number): string | undefined {
    const parents = this.parentProblem(temp);
    if (parents === 'missing') return 'a folder above it was removed while it was written';
    if (parents !== undefined) return parents;
    try {
      if (this.fs.lstat(this.at(temp)).ino === this.fs.fstat(fd).ino) return undefined;
    } catch {
      // Gone: said below.
    }
    return 'a folder above it changed while it was written';
  }

  /** Sets the time and the permission bits `meta` has on the open file `fd`. */
  private applyMeta(fd: number, meta: FileMeta): void {
    if (meta.mode !== undefined) this.fs.chmod(fd, meta.mode & 0o777);
    if (meta.mtime !== undefined) this.fs.setTimes(fd, meta.mtime);
  }

  /**
   * Sets the time and permission bits of the regular file at `path` (a temporary file
   * downloaded, or a file whose content stays): opened without following a link, like any read.
   * Its new stamp, or why it could not be done.
   */
  setMeta(path: string, meta: FileMeta): Stamp | { problem: string } {
    const parents = this.parentProblem(path);
    if (parents !== undefined) return { problem: parents === 'missing' ? 'not there' : parents };
    let fd: number;
    try {
      fd = this.fs.open(this.at(path), 'read');
    } catch (err: unknown) {
      return { problem: `cannot be opened (${codeOf(err) ?? String(err)})` };
    }
    try {
      if (!this.fs.fstat(fd).isFile()) return { problem: 'not a regular file' };
      this.applyMeta(fd, meta);
      return stampOf(this.fs.fstat(fd));
    } catch (err: unknown) {
      return { problem: `its time or mode cannot be set (${codeOf(err) ?? String(err)})` };
    } finally {
      this.fs.close(fd);
    }
  }

  /** Puts a temporary file in place of `path`; the new file's stamp, or why it failed. */
  commitTemp(temp: string, path: string): Stamp | { problem: string } {
    try {
      this.fs.rename(this.at(temp), this.at(path));
      return stampOf(this.fs.lstat(this.at(path)));
    } catch (err: unknown) {
      this.removeQuietly(temp);
      return { problem: `cannot be replaced (${codeOf(err) ?? String(err)})` };
    }
  }

  /**
   * Moves the file at `path` aside to `to` (a conflict copy's name) without replacing anything:
   * when `to` is taken, the next free name from `next` is tried. Resolves with the name used, or
   * undefined when it failed.
   */
  moveAside(
    path: string,
    to: string,
    next: (n: number) => string = (n) => `${to}.${n}`,
  ): string | undefined {
    for (let n = 0; n < 100; n += 1) {
      const target = n === 0 ? to : next(n);
      if (this.makeParents(target) !== undefined) return undefined;
      try {
        // A hard link fails when the name is taken, where a rename would replace it.
        this.fs.link(this.at(path), this.at(target));
        this.fs.unlink(this.at(path));
        return target;
      } catch (err: unknown) {
        if (codeOf(err) === 'EEXIST') continue;
        // No hard links here (FAT, some network shares): a rename after a look.
        if (this.statFile(target) !== undefined) continue;
        try {
          this.fs.rename(this.at(path), this.at(target));
          return target;
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  }

  /** Deletes the file at `path`, then the folders above it that are left empty. */
  removeFile(path: string): string | undefined {
    try {
      this.fs.unlink(this.at(path));
    } catch (err: unknown) {
      if (codeOf(err) !== 'ENOENT') return `cannot be deleted (${codeOf(err) ?? String(err)})`;
    }
    this.removeEmptyFolders(path);
    return undefined;
  }

  /** Removes the folders above `path` that are empty, deepest first; stops at the first that is not. */
  removeEmptyFolders(path: string): void {
    for (const parent of parentsOf(path).reverse()) {
      try {
        this.fs.rmdir(this.at(parent));
      } catch {
        return;
      }
    }
  }

  /** Removes the folder at `path` if it is a real, empty folder; whether it did. */
  removeEmptyFolder(path: string): boolean {
    try {
      if (!this.fs.lstat(this.at(path)).isDirectory()) return false;
      this.fs.rmdir(this.at(path));
      return true;
    } catch {
      return false;
    }
  }

  removeQuietly(path: string): void {
    try {
      this.fs.unlink(this.at(path));
    } catch {
      // Already gone.
    }
  }

  /**
   * Every file under the folder, or under the given parts of it (`scopes`: relative paths of
   * files or folders, `''` for all), without following links; what `ignores` matches and
   * sync-host's own files left out without a word.
   */
  walk(scopes: string[] = [''], ignores: IgnoreTest = () => false): Walk {
    const walk: Walk = { files: new Map(), unreadable: [], temps: [], skipped: new Map() };
    const visit = (folder: string) => {
      let entries: ReturnType<FileSystem['readdir']>;
      try {
        entries = this.fs.readdir(this.at(folder));
      } catch (err: unknown) {
        if (codeOf(err) === 'ENOENT' || codeOf(err) === 'ENOTDIR') return;
        walk.unreadable.push(folder);
        return;
      }
      for (const dirent of entries) {
        let name: string;
        try {
          name = nameDecoder.decode(dirent.name);
        } catch {
          const shown = `${folder === '' ? '' : `${folder}/`}${dirent.name.toString('latin1')}`;
          walk.skipped.set(shown, 'the name is not valid UTF-8');
          continue;
        }
        const path = folder === '' ? name : `${folder}/${name}`;
        if (name.startsWith(ownPrefix)) continue;
        if (name.startsWith('.') && name.endsWith(tempSuffix)) {
          if (dirent.isFile()) walk.temps.push(path);
          continue;
        }
        if (ignores(path, dirent.isDirectory())) continue;
        if (dirent.isSymbolicLink()) {
          walk.skipped.set(path, 'a symbolic link (not followed, not synced)');
          continue;
        }
        const problem = pathProblem(path);
        if (problem !== undefined) {
          walk.skipped.set(path, problem);
          continue;
        }
        if (dirent.isDirectory()) visit(path);
        else if (dirent.isFile()) addFile(path);
        else walk.skipped.set(path, 'not a regular file');
      }
    };
    const addFile = (path: string) => {
      try {
        walk.files.set(path, stampOf(this.fs.lstat(this.at(path))));
      } catch {
        // Gone between the listing and the stat: the next walk sees what is there.
      }
    };
    for (const scope of scopes) {
      if (scope === '') {
        visit('');
        continue;
      }
      // A part named by the watcher: a file, a folder, or gone; nothing through a link.
      if (pathProblem(scope) !== undefined || this.parentProblem(scope) !== undefined) continue;
      let stats: FsStats;
      try {
        stats = this.fs.lstat(this.at(scope));
      } catch {
        continue;
      }
      if (ignores(scope, stats.isDirectory())) continue;
      if (stats.isDirectory()) visit(scope);
      else if (stats.isFile()) addFile(scope);
      else if (stats.isSymbolicLink())
        walk.skipped.set(scope, 'a symbolic link (not followed, not synced)');
    }
    return walk;
  }

  /**
   * The digest that disk records keep (the start of the SHA-256) of the regular file at `path`,
   * text or not, read in blocks; undefined when it is not there or not a regular file.
   */
  fileDigest(path: string): string | undefined {
    const stamp = this.statFile(path);
    if (stamp === undefined || 'problem' in stamp) return undefined;
    let fd: number;
    try {
      fd = this.fs.open(this.at(path), 'read');
    } catch {
      return undefined;
    }
    try {
      if (!this.fs.fstat(fd).isFile()) return undefined;
      const hash = createHash('sha256');
      const block = Buffer.alloc(1_048_576);
      for (;;) {
        const read = this.fs.read(fd, block, 0, block.length, null);
        if (read === 0) break;
        hash.update(block.subarray(0, read));
      }
      return hash.digest('hex').slice(0, 32);
    } catch {
      return undefined;
    } finally {
      this.fs.close(fd);
    }
  }
}
