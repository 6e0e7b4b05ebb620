import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { codeOf, type FileSystem, nodeFileSystem } from '../../client/folder/file-system.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * The in-memory file system the engine's fast tests run on, held against the real one: random
 * sequences of the seam's calls (and a user's writes and links) made on both, in a temporary
 * folder and in memory; every call gives the same result or fails with the same code.
 */

const runs = Number(process.env.MEMORY_FS_RUNS ?? 300);
const names = ['a', 'b', 'd', 'd/x', 'd/y', 'l', 'l/x'];
const name = fc.constantFrom(...names);

type Step =
  | {
      call:
        | 'mkdir'
        | 'mkdirp'
        | 'rmdir'
        | 'unlink'
        | 'create'
        | 'readFile'
        | 'lstat'
        | 'readdir'
        | 'readOpen';
      path: string;
    }
  | { call: 'rename' | 'link'; path: string; to: string }
  | { call: 'symlink'; path: string; target: string }
  | { call: 'write' | 'append'; path: string; text: string };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    call: fc.constantFrom(
      'mkdir',
      'mkdirp',
      'rmdir',
      'unlink',
      'create',
      'readFile',
      'lstat',
      'readdir',
      'readOpen',
    ) as fc.Arbitrary<'mkdir'>,
    path: name,
  }),
  fc.record({
    call: fc.constantFrom('rename', 'link') as fc.Arbitrary<'rename'>,
    path: name,
    to: name,
  }),
  fc.record({
    call: fc.constant('symlink' as const),
    path: name,
    target: fc.constantFrom('d', 'a', 'missing'),
  }),
  fc.record({
    call: fc.constantFrom('write', 'append') as fc.Arbitrary<'write'>,
    path: name,
    text: fc.string({ maxLength: 8 }),
  }),
);

/** One call on a file system whose folder is `root`: its result, or the code it failed with. */
function perform(
  fs: FileSystem,
  root: string,
  link: (target: string, path: string) => void,
  s: Step,
): unknown {
  const at = (path: string) => join(root, path);
  try {
    switch (s.call) {
      case 'mkdir':
        return fs.mkdir(at(s.path));
      case 'mkdirp':
        return fs.mkdir(at(s.path), { recursive: true });
      case 'rmdir':
        return fs.rmdir(at(s.path));
      case 'unlink':
        return fs.unlink(at(s.path));
      case 'create':
        return fs.close(fs.open(at(s.path), 'create', 0o644));
      case 'readFile':
        return Buffer.from(fs.readFile(at(s.path))).toString('utf8');
      case 'lstat': {
        const stats = fs.lstat(at(s.path));
        const kind = stats.isFile() ? 'file' : stats.isDirectory() ? 'dir' : 'link';
        return kind === 'file' ? { kind, size: stats.size } : { kind };
      }
      case 'readdir':
        return fs
          .readdir(at(s.path))
          .map((e) => `${e.name.toString()}:${e.isFile() ? 'f' : e.isDirectory() ? 'd' : 'l'}`)
          .sort();
      case 'readOpen': {
        const fd = fs.open(at(s.path), 'read');
        try {
          const size = fs.fstat(fd).size;
          const buffer = Buffer.alloc(64);
          const read = fs.read(fd, buffer, 0, 64, 0);
          return {
            file: fs.fstat(fd).isFile(),
            text: buffer.subarray(0, read).toString('utf8'),
            size,
          };
        } finally {
          fs.close(fd);
        }
      }
      case 'rename':
        return fs.rename(at(s.path), at(s.to));
      case 'link':
        return fs.link(at(s.path), at(s.to));
      case 'symlink':
        return link(s.target, at(s.path));
      case 'write':
      case 'append': {
        const fd = fs.open(at(s.path), s.call === 'write' ? 'replace' : 'append', 0o644);
        try {
          const data = Buffer.from(s.text);
          return fs.write(fd, data, 0, data.length);
        } finally {
          fs.close(fd);
        }
      }
    }
  } catch (err: unknown) {
    return { error: codeOf(err) ?? String(err) };
  }
}

describe('the in-memory file system against the real one', () => {
  const base = mkdtempSync(join(tmpdir(), 'memory-fs-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  let count = 0;

  it('gives the same result or the same error code for every call', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), (steps) => {
        count += 1;
        const real = join(base, String(count));
        nodeFileSystem.mkdir(real);
        const memory = new MemoryFs();
        memory.mkdir('/r', { recursive: true });
        for (const s of steps) {
          // A dangling relative link or one to a folder of the same tree, on both.
          const onDisk = perform(
            nodeFileSystem,
            real,
            (target, path) => symlinkSync(target, path),
            s,
          );
          const inMemory = perform(memory, '/r', (target, path) => memory.symlink(target, path), s);
          expect(inMemory, JSON.stringify(s)).toEqual(onDisk);
        }
      }),
      { numRuns: runs },
    );
  });
});
