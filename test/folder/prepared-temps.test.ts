import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Disk } from '../../client/folder/disk.ts';

/**
 * The temporary files of a batch of writes made all at once from a few threads, on the real
 * file system (`Disk.prepareTemps`): taken by the writes, the rest removed, no descriptor
 * left open, and the check that a new file is inside the folder made on each as before.
 */

let root: string;

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Every file under `dir`, relative, sorted. */
function filesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1))
    .sort();
}

const openDescriptors = () => readdirSync('/proc/self/fd').length;

describe('temporary files made ahead for a batch', () => {
  it('are taken by the writes, with their content; the ones not taken are removed, and no descriptor stays open', () => {
    root = mkdtempSync(join(tmpdir(), 'prepared-temps-'));
    const disk = new Disk(root);
    const paths = Array.from({ length: 60 }, (_, n) => `notes/${n % 6}/note ${n}.md`);
    // the threads that make them hold descriptors of their own: started first
    disk.prepareTemps(paths.map((path) => `warm-up/${path}`));
    disk.dropPreparedTemps();
    rmSync(join(root, 'warm-up'), { recursive: true });
    const before = openDescriptors();
    disk.prepareTemps(paths);
    // made ahead, in folders made as a write makes them
    expect(filesUnder(root).filter((name) => name.endsWith('.sync-host-tmp'))).toHaveLength(60);
    const written = paths.slice(0, 45).map((path) => {
      const made = disk.writeTemp(path, `text of ${path}\n`);
      if ('problem' in made) throw new Error(made.problem);
      return [path, made.temp] as const;
    });
    disk.dropPreparedTemps();
    expect(filesUnder(root).sort()).toEqual(written.map(([, temp]) => temp).sort());
    for (const [path, temp] of written) {
      expect(readFileSync(join(root, temp), 'utf8')).toBe(`text of ${path}\n`);
    }
    expect(openDescriptors()).toBe(before);
  });

  it('are checked to be inside the folder when written: one whose folder became a link is removed, nothing is written there', () => {
    root = mkdtempSync(join(tmpdir(), 'prepared-temps-'));
    const disk = new Disk(join(root, 'folder'));
    mkdirSync(join(root, 'folder'));
    mkdirSync(join(root, 'elsewhere'));
    const paths = Array.from({ length: 40 }, (_, n) => `docs/${n}.md`);
    disk.prepareTemps(paths);
    // the folder is swapped for a link to a place outside, after the files were made ahead
    renameSync(join(root, 'folder/docs'), join(root, 'elsewhere/docs'));
    symlinkSync(join(root, 'elsewhere/docs'), join(root, 'folder/docs'));
    const made = disk.writeTemp('docs/0.md', 'secret\n');
    expect(made).toMatchObject({ problem: expect.stringContaining('docs') });
    disk.dropPreparedTemps();
    const outside = filesUnder(join(root, 'elsewhere'));
    for (const name of outside) {
      expect(readFileSync(join(root, 'elsewhere', name), 'utf8')).not.toContain('secret');
    }
  });

  it('are not made for a small batch (one by one is as fast)', () => {
    root = mkdtempSync(join(tmpdir(), 'prepared-temps-'));
    const disk = new Disk(root);
    disk.prepareTemps(['a.md', 'b.md']);
    expect(filesUnder(root)).toEqual([]);
  });
});
