import { posix } from 'node:path';
import type { FileSystem, FsDirent, FsStats } from '../../client/folder/file-system.ts';

/**
 * A file system in memory, for the folder engine's tests: folders, files, hard links and
 * symbolic links (followed inside a path, never at its end where the engine says not to), inode
 * numbers, modification times (each change a millisecond later than the last, so every change
 * shows in a stamp), permission bits (a new file's are the mode it was created with, no umask), and `node:fs`'s errors (`ENOENT`, `EEXIST`, `ENOTDIR`, `EISDIR`, `ELOOP`,
 * `ENOTEMPTY`, `EBADF`). Synchronous like the engine's seam; a run of the engine over it touches
 * no disk. Besides the seam, what a user (or a test) does: `writeFile`, `symlink`, `tree`.
 */

type Node = FileNode | DirNode | LinkNode;
interface FileNode {
  kind: 'file';
  ino: number;
  mtimeMs: number;
  mode: number;
  data: Buffer;
}
interface DirNode {
  kind: 'dir';
  ino: number;
  mtimeMs: number;
  entries: Map<string, Node>;
}
interface LinkNode {
  kind: 'link';
  ino: number;
  mtimeMs: number;
  target: string;
}

interface Open {
  node: FileNode | DirNode;
  position: number;
  append: boolean;
}

export class MemoryFs implements FileSystem {
  /**
   * `timeResolutionMs`: the file system keeps times this coarse (2,000 for FAT, 1,000 for
   * ext3 or HFS+): every time given or set is cut to it, as such a disk stores it.
   */
  constructor(private readonly timeResolutionMs = 1) {}

  private nextIno = 2;
  private clock = 1_767_225_600_000;
  private nextFd = 3;
  private readonly fds = new Map<number, Open>();
  private readonly root: DirNode = { kind: 'dir', ino: 1, mtimeMs: this.clock, entries: new Map() };

  lstat(path: string): FsStats {
    return statsOf(this.find(path, false, 'lstat').node ?? fail('ENOENT', 'lstat', path));
  }

  fstat(fd: number): FsStats {
    return statsOf(this.opened(fd).node);
  }

  open(
    path: string,
    how: 'read' | 'create' | 'append' | 'replace',
    mode?: number,
    depth = 0,
  ): number {
    const raw = this.find(path, false, 'open').node;
    if (raw?.kind === 'link' && (how === 'append' || how === 'replace')) {
      // Through the link, to wherever it points (a file made there when missing).
      if (depth > 40) fail('ELOOP', 'open', path);
      return this.open(posix.resolve(posix.dirname(path), raw.target), how, mode, depth + 1);
    }
    const found = this.find(path, false, 'open');
    let node = found.node;
    if (how === 'read') {
      if (node === undefined) fail('ENOENT', 'open', path);
      if (node.kind === 'link') fail('ELOOP', 'open', path);
    } else if (how === 'create' && node !== undefined) fail('EEXIST', 'open', path);
    if (node?.kind === 'dir' && how !== 'read') fail('EISDIR', 'open', path);
    if (node === undefined) {
      node = {
        kind: 'file',
        ino: this.nextIno++,
        mtimeMs: this.tick(),
        mode: (mode ?? 0o666) & 0o777,
        data: Buffer.alloc(0),
      };
      this.parentOf(found, path).entries.set(found.name, node);
    } else if (how === 'replace' && node.kind === 'file') {
      node.data = Buffer.alloc(0);
      node.mtimeMs = this.tick();
    }
    const fd = this.nextFd++;
    this.fds.set(fd, { node: node as FileNode | DirNode, position: 0, append: how === 'append' });
    return fd;
  }

  read(
    fd: number,
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number | null,
  ): number {
    const open = this.opened(fd);
    if (open.node.kind !== 'file') fail('EISDIR', 'read', String(fd));
    const from = position ?? open.position;
    const bytes = open.node.data.subarray(from, from + length);
    buffer.set(bytes, offset);
    if (position === null) open.position += bytes.length;
    return bytes.length;
  }

  write(fd: number, data: Uint8Array, offset: number, length: number): number {
    const open = this.opened(fd);
    if (open.node.kind !== 'file') fail('EISDIR', 'write', String(fd));
    const file = open.node;
    const at = open.append ? file.data.length : open.position;
    const bytes = data.subarray(offset, offset + length);
    const grown = Buffer.alloc(Math.max(file.data.length, at + bytes.length));
    file.data.copy(grown);
    grown.set(bytes, at);
    file.data = grown;
    file.mtimeMs = this.tick();
    open.position = at + bytes.length;
    return bytes.length;
  }

  sync(fd: number): void {
    this.opened(fd);
  }

  chmod(fd: number, mode: number): void {
    const open = this.opened(fd);
    if (open.node.kind === 'file') open.node.mode = mode & 0o777;
  }

  setTimes(fd: number, mtimeMs: number): void {
    this.opened(fd).node.mtimeMs = this.coarse(mtimeMs);
  }

  close(fd: number): void {
    if (!this.fds.delete(fd)) fail('EBADF', 'close', String(fd));
  }

  readdir(path: string): FsDirent[] {
    const dir = this.dirAt(path, 'scandir');
    return [...dir.entries].map(([name, node]) => ({
      name: Buffer.from(name),
      isFile: () => node.kind === 'file',
      isDirectory: () => node.kind === 'dir',
      isSymbolicLink: () => node.kind === 'link',
    }));
  }

  readFile(path: string): Uint8Array {
    const node = this.find(path, true, 'open').node ?? fail('ENOENT', 'open', path);
    if (node.kind !== 'file') fail('EISDIR', 'read', path);
    return Buffer.from(node.data);
  }

  mkdir(path: string, options: { recursive?: boolean } = {}): void {
    if (options.recursive === true) {
      // Each missing folder from the root down; one that is there (or a link to one) is passed.
      const parts = posix
        .normalize(path)
        .split('/')
        .filter((part) => part !== '');
      for (let i = 1; i <= parts.length; i += 1) {
        const at = `/${parts.slice(0, i).join('/')}`;
        const node = this.find(at, true, 'mkdir').node;
        // A link to nothing is in the way, and is no folder to go on from.
        if (node === undefined && this.find(at, false, 'mkdir').node !== undefined) {
          fail('ENOENT', 'mkdir', path);
        }
        if (node === undefined) this.mkdir(at);
        else if (node.kind !== 'dir')
          fail(i === parts.length ? 'EEXIST' : 'ENOTDIR', 'mkdir', path);
      }
      return;
    }
    const found = this.find(path, false, 'mkdir');
    if (found.node !== undefined) fail('EEXIST', 'mkdir', path);
    const dir: DirNode = {
      kind: 'dir',
      ino: this.nextIno++,
      mtimeMs: this.tick(),
      entries: new Map(),
    };
    this.parentOf(found, path).entries.set(found.name, dir);
  }

  rmdir(path: string): void {
    const found = this.find(path, false, 'rmdir');
    const node = found.node ?? fail('ENOENT', 'rmdir', path);
    if (node.kind !== 'dir') fail('ENOTDIR', 'rmdir', path);
    if (node.entries.size > 0) fail('ENOTEMPTY', 'rmdir', path);
    this.parentOf(found, path).entries.delete(found.name);
  }

  unlink(path: string): void {
    const found = this.find(path, false, 'unlink');
    const node = found.node ?? fail('ENOENT', 'unlink', path);
    if (node.kind === 'dir') fail('EISDIR', 'unlink', path);
    this.parentOf(found, path).entries.delete(found.name);
  }

  rename(from: string, to: string): void {
    const source = this.find(from, false, 'rename');
    const target = this.find(to, false, 'rename');
    const node = source.node ?? fail('ENOENT', 'rename', from);
    const there = target.node;
    if (there === node) return; // the same file: nothing to do
    // A folder into itself (also through a link): refused.
    const into = target.parent;
    if (node.kind === 'dir' && into !== undefined && (into === node || holds(node, into))) {
      fail('EINVAL', 'rename', to);
    }
    // Onto a folder it is in: never empty. A file onto a folder: EISDIR, before its content counts.
    const fromFolder = source.parent;
    if (
      there?.kind === 'dir' &&
      fromFolder !== undefined &&
      (fromFolder === there || holds(there, fromFolder))
    ) {
      fail('ENOTEMPTY', 'rename', to);
    }
    if (there?.kind === 'dir' && node.kind !== 'dir') fail('EISDIR', 'rename', to);
    if (there?.kind === 'dir' && there.entries.size > 0) fail('ENOTEMPTY', 'rename', to);
    if (there !== undefined && there.kind !== 'dir' && node.kind === 'dir')
      fail('ENOTDIR', 'rename', to);
    this.parentOf(source, from).entries.delete(source.name);
    this.parentOf(target, to).entries.set(target.name, node);
  }

  link(from: string, to: string): void {
    const node = this.find(from, false, 'link').node ?? fail('ENOENT', 'link', from);
    const target = this.find(to, false, 'link');
    if (target.node !== undefined) fail('EEXIST', 'link', to);
    if (node.kind === 'dir') fail('EPERM', 'link', from);
    this.parentOf(target, to).entries.set(target.name, node);
  }

  // What a user does, besides the engine's seam.

  /** Writes a whole file as an editor does (created, or emptied and written, through links). */
  writeFile(path: string, content: string | Uint8Array): void {
    const fd = this.open(path, 'replace', 0o644);
    const data = typeof content === 'string' ? Buffer.from(content) : content;
    this.write(fd, data, 0, data.length);
    this.close(fd);
  }

  /** Sets a file's permission bits, as `chmod` does (the modification time stays). */
  setMode(path: string, mode: number): void {
    const fd = this.open(path, 'read');
    this.chmod(fd, mode);
    this.close(fd);
  }

  /** A symbolic link at `path` to `target` (absolute, or relative to the link's folder). */
  symlink(target: string, path: string): void {
    const found = this.find(path, false, 'symlink');
    if (found.node !== undefined) fail('EEXIST', 'symlink', path);
    const link: LinkNode = { kind: 'link', ino: this.nextIno++, mtimeMs: this.tick(), target };
    this.parentOf(found, path).entries.set(found.name, link);
  }

  /** A file's text, or undefined when `path` is not a file. */
  textAt(path: string): string | undefined {
    try {
      const node = this.find(path, true, 'open').node;
      return node?.kind === 'file' ? node.data.toString('utf8') : undefined;
    } catch {
      return undefined;
    }
  }

  /** Removes `path` and everything under it (nothing when it is not there). */
  removeAll(path: string): void {
    const found = this.find(path, false, 'rm');
    if (found.node !== undefined) this.parentOf(found, path).entries.delete(found.name);
  }

  /** Every regular file under the folder `dir`, by relative path, with its text. */
  tree(dir: string): [string, string][] {
    const files: [string, string][] = [];
    const visit = (node: DirNode, prefix: string) => {
      for (const [name, child] of [...node.entries].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const path = prefix === '' ? name : `${prefix}/${name}`;
        if (child.kind === 'dir') visit(child, path);
        else if (child.kind === 'file') files.push([path, child.data.toString('utf8')]);
      }
    };
    const node = this.find(dir, true, 'scandir').node;
    if (node?.kind === 'dir') visit(node, '');
    return files;
  }

  /** The file system's clock: later than every time it gave before. */
  now(): number {
    this.clock += 1;
    return this.clock;
  }

  private tick(): number {
    this.clock += 1;
    return this.coarse(this.clock);
  }

  private coarse(mtimeMs: number): number {
    return Math.floor(mtimeMs / this.timeResolutionMs) * this.timeResolutionMs;
  }

  private opened(fd: number): Open {
    return this.fds.get(fd) ?? fail('EBADF', 'fd', String(fd));
  }

  private dirAt(path: string, syscall: string): DirNode {
    const node = this.find(path, true, syscall).node ?? fail('ENOENT', syscall, path);
    if (node.kind !== 'dir') fail('ENOTDIR', syscall, path);
    return node;
  }

  private parentOf(found: { parent: DirNode | undefined }, path: string): DirNode {
    return found.parent ?? fail('EPERM', 'root', path);
  }

  /**
   * The entry `path` names: its folder and name, and the node (undefined when absent). Links
   * inside the path are followed (as the kernel does); the last part's only with `follow`.
   */
  private find(
    path: string,
    follow: boolean,
    syscall: string,
    depth = 0,
  ): { parent: DirNode | undefined; name: string; node: Node | undefined } {
    if (depth > 40) fail('ELOOP', syscall, path);
    const parts = posix
      .normalize(path)
      .split('/')
      .filter((part) => part !== '' && part !== '.');
    let dir = this.root;
    let here = '/';
    for (const [i, part] of parts.entries()) {
      let node = dir.entries.get(part);
      const last = i === parts.length - 1;
      let next = posix.join(here, part);
      if (node?.kind === 'link' && (!last || follow)) {
        next = posix.resolve(here, node.target);
        node = this.find(next, true, syscall, depth + 1).node;
      }
      if (last) return { parent: dir, name: part, node };
      if (node === undefined) fail('ENOENT', syscall, path);
      if (node.kind !== 'dir') fail('ENOTDIR', syscall, path);
      dir = node;
      here = next;
    }
    return { parent: undefined, name: '', node: this.root };
  }
}

/** Whether `dir` is somewhere inside `folder`. */
function holds(folder: DirNode, dir: DirNode): boolean {
  for (const child of folder.entries.values()) {
    if (child.kind === 'dir' && (child === dir || holds(child, dir))) return true;
  }
  return false;
}

function statsOf(node: Node): FsStats {
  return {
    isFile: () => node.kind === 'file',
    isDirectory: () => node.kind === 'dir',
    isSymbolicLink: () => node.kind === 'link',
    size:
      node.kind === 'file' ? node.data.length : node.kind === 'link' ? node.target.length : 4096,
    mtimeMs: node.mtimeMs,
    ino: node.ino,
    mode: node.kind === 'file' ? 0o100000 | node.mode : node.kind === 'dir' ? 0o40755 : 0o120777,
  };
}

function fail(code: string, syscall: string, path: string): never {
  throw Object.assign(new Error(`${code}: ${syscall} '${path}'`), { code, syscall, path });
}
