import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { watchTree } from '../../../client/cli/folder-watcher.ts';
import { eventually } from '../../helpers/wait.ts';

describe('watchTree', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  function watched(): { dir: string; outside: string; named: (string | null)[] } {
    const root = mkdtempSync(join(tmpdir(), 'watch-tree-'));
    const dir = join(root, 'folder');
    const outside = join(root, 'outside');
    mkdirSync(join(dir, 'notes'), { recursive: true });
    mkdirSync(outside);
    const named: (string | null)[] = [];
    const problems: unknown[] = [];
    const watcher = watchTree(
      dir,
      (path) => named.push(path),
      (err) => problems.push(err),
    );
    cleanups.push(() => {
      watcher.close();
      rmSync(root, { recursive: true, force: true });
      expect(problems).toEqual([]);
    });
    return { dir, outside, named };
  }

  it('names a file written in a folder that was there at the start, by its relative path', async () => {
    const { dir, named } = watched();
    writeFileSync(join(dir, 'notes', 'a.md'), 'a\n');
    await eventually(() => named.includes('notes/a.md'), 'notes/a.md named');
  });

  it('watches folders made later, nested ones included', async () => {
    const { dir, named } = watched();
    mkdirSync(join(dir, 'new', 'deep'), { recursive: true });
    await eventually(() => named.includes('new'), 'the new folder named');
    // The nested folder's watch is set once its parent's event came; a file written after it is
    // named by its own path.
    let round = 0;
    await eventually(() => {
      round += 1;
      writeFileSync(join(dir, 'new', 'deep', 'b.md'), `b ${round}\n`);
      return named.includes('new/deep/b.md');
    }, 'new/deep/b.md named');
  });

  it('never follows a link to a folder outside', async () => {
    const { dir, outside, named } = watched();
    symlinkSync(outside, join(dir, 'link'));
    await eventually(() => named.includes('link'), 'the link named');
    writeFileSync(join(outside, 'secret.md'), 'x\n');
    writeFileSync(join(dir, 'notes', 'after.md'), 'after\n');
    await eventually(() => named.includes('notes/after.md'), 'the later file named');
    expect(named.filter((path) => path?.startsWith('link/'))).toEqual([]);
  });
});
