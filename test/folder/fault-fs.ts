import type { FileSystem, FsDirent, FsStats } from '../../client/folder/file-system.ts';

/** The calls of the seam, as `before` hears them. */
export type FsCall = keyof FileSystem;

/**
 * A file system that injects faults into another: `before` hears every call with its path (for
 * calls on an open file, the path it was opened at) and may throw an error of its choosing (a
 * full disk, a permission refused) or change the file system first (a file edited between its
 * stat and its read, a folder swapped for a link); `chunk` caps the bytes of each read and write
 * (short reads and writes, which the caller must loop over).
 */
export class FaultFs implements FileSystem {
  before: ((call: FsCall, path: string) => void) | undefined;
  chunk = Number.POSITIVE_INFINITY;
  private readonly paths = new Map<number, string>();

  constructor(private readonly inner: FileSystem) {}

  lstat(path: string): FsStats {
    this.hear('lstat', path);
    return this.inner.lstat(path);
  }

  fstat(fd: number): FsStats {
    this.hear('fstat', this.pathOf(fd));
    return this.inner.fstat(fd);
  }

  open(path: string, how: 'read' | 'create' | 'append' | 'replace', mode?: number): number {
    this.hear('open', path);
    const fd = this.inner.open(path, how, mode);
    this.paths.set(fd, path);
    return fd;
  }

  read(
    fd: number,
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number | null,
  ): number {
    this.hear('read', this.pathOf(fd));
    return this.inner.read(fd, buffer, offset, Math.min(length, this.chunk), position);
  }

  write(fd: number, data: Uint8Array, offset: number, length: number): number {
    this.hear('write', this.pathOf(fd));
    return this.inner.write(fd, data, offset, Math.min(length, this.chunk));
  }

  sync(fd: number, dataOnly: boolean): void {
    this.hear('sync', this.pathOf(fd));
    this.inner.sync(fd, dataOnly);
  }

  close(fd: number): void {
    this.paths.delete(fd);
    this.inner.close(fd);
  }

  readdir(path: string): FsDirent[] {
    this.hear('readdir', path);
    return this.inner.readdir(path);
  }

  readFile(path: string): Uint8Array {
    this.hear('readFile', path);
    return this.inner.readFile(path);
  }

  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): void {
    this.hear('mkdir', path);
    this.inner.mkdir(path, options);
  }

  rmdir(path: string): void {
    this.hear('rmdir', path);
    this.inner.rmdir(path);
  }

  unlink(path: string): void {
    this.hear('unlink', path);
    this.inner.unlink(path);
  }

  rename(from: string, to: string): void {
    this.hear('rename', from);
    this.inner.rename(from, to);
  }

  link(from: string, to: string): void {
    this.hear('link', from);
    this.inner.link(from, to);
  }

  chmod(fd: number, mode: number): void {
    this.hear('chmod', this.pathOf(fd));
    this.inner.chmod(fd, mode);
  }

  setTimes(fd: number, mtimeMs: number): void {
    this.hear('setTimes', this.pathOf(fd));
    this.inner.setTimes(fd, mtimeMs);
  }

  private hear(call: FsCall, path: string): void {
    this.before?.(call, path);
  }

  private pathOf(fd: number): string {
    return this.paths.get(fd) ?? `fd ${fd}`;
  }
}

/** An error as `node:fs` throws it. */
export function fsError(code: string, path: string): Error {
  return Object.assign(new Error(`${code}: injected at '${path}'`), { code, path });
}
