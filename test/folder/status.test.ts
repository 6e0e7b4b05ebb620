import { describe, expect, it } from 'vitest';
import { conflictName, conflictPattern } from '../../client/folder/conflicts.ts';
import { UnconfirmedFiles } from '../../client/folder/status.ts';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

describe('what sync-host status counts', () => {
  it('drops a file once a flush started after its change is confirmed, not one changed since', () => {
    const files = new UnconfirmedFiles();
    expect(files.mark()).toBeUndefined();
    files.changed('a.md', 10);
    files.changed('b.md', 5);
    const first = files.mark()!;
    files.changed('b.md', 7); // changed again while the first flush is under way
    expect(files.summary).toEqual({ files: 2, bytes: 17 });
    files.confirmed(first);
    expect(files.summary).toEqual({ files: 1, bytes: 7 });
    files.confirmed(files.mark()!);
    expect(files.summary).toEqual({ files: 0, bytes: 0 });
    expect(files.mark()).toBeUndefined();
  });

  it('recognises the names of conflict copies, and only those', () => {
    const at = Date.UTC(2026, 10, 26, 9, 5, 7);
    for (const path of ['plan.md', 'notes/a b.txt', 'Makefile', '.obsidian/app.json']) {
      expect(conflictPattern.test(conflictName(path, at, '12'))).toBe(true);
      expect(conflictPattern.test(path)).toBe(false);
    }
    expect(conflictPattern.test('plan.sync-conflict-notes.md')).toBe(false);
  });

  it('counts every name here that does not sync, and forgets one once it is gone', async () => {
    const fs = new MemoryFs();
    const device = new MemoryDevice(fs, new MemoryRoom(), 1, '/home/d/notes', '/home/d/state.log');
    await device.start();
    fs.writeFile('/home/d/notes/aux.md', 'a name Windows refuses\n');
    fs.writeFile('/home/d/notes/ok.md', 'syncs\n');
    fs.symlink('/etc', '/home/d/notes/link');
    device.scan();
    expect(device.folder!.folderStatus().skipped).toBe(2);
    fs.unlink('/home/d/notes/aux.md');
    device.scan();
    expect(device.folder!.folderStatus().skipped).toBe(1);
    await device.stop();
  });
});
