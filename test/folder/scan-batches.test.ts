import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FolderSync } from '../../client/folder/folder-sync.ts';

describe('a scan of many new files', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  function folderWith(count: number, bytes: number): { dir: string; stateFile: string } {
    const root = mkdtempSync(join(tmpdir(), 'scan-batches-'));
    roots.push(root);
    const dir = join(root, 'notes');
    mkdirSync(join(dir, 'deep'), { recursive: true });
    for (let i = 0; i < count; i += 1) {
      const line = `note ${i} `.padEnd(63, String(i % 10));
      writeFileSync(join(dir, 'deep', `n${i}.md`), `${line}\n`.repeat(Math.ceil(bytes / 64)));
    }
    return { dir, stateFile: join(root, 'state', 'folder.log') };
  }

  it('sends them in several updates of a few MiB, every file once, all of them in the state log', () => {
    const { dir, stateFile } = folderWith(12, 700_000);
    const lines: string[] = [];
    const folder = new FolderSync({
      dir,
      stateFile,
      device: '1',
      log: ({ line }) => lines.push(line),
    });
    const updates: number[] = [];
    folder.shared.on('update', (update: Uint8Array) => updates.push(update.length));
    folder.scan();
    expect(lines.filter((line) => line.startsWith('sent '))).toHaveLength(12);
    const total = updates.reduce((a, b) => a + b, 0);
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...updates)).toBeLessThan(total);
    expect(folder.liveFiles()).toMatchObject({ files: 12 });
    folder.close();

    // A restart reads the log: every file is known, none is sent again.
    const again: string[] = [];
    const reopened = new FolderSync({
      dir,
      stateFile,
      device: '1',
      log: ({ line }) => again.push(line),
    });
    reopened.scan();
    expect(again.filter((line) => line.startsWith('sent '))).toEqual([]);
    expect(reopened.liveFiles()).toMatchObject({ files: 12 });
    reopened.close();
  });
});
