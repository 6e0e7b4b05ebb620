import { describe, expect, it } from 'vitest';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * A device whose file system keeps coarse times (FAT's 2 s) beside one that keeps milliseconds:
 * each file gets the time its disk can hold (cut, never later), the cut time is never taken for
 * a change and sent back (no ping-pong of times), and an edit made on the coarse disk reaches
 * the other device with the coarse disk's time. Two engines in memory (no host, no disk).
 */

const fine = new MemoryFs();
const fat = new MemoryFs(2_000);
const room = new MemoryRoom();
let updates = 0;
room.host.on('update', () => {
  updates += 1;
});

function settle(devices: MemoryDevice[]): void {
  for (let round = 0; round < 6; round += 1) {
    for (const each of devices) {
      each.deliver();
      each.scan();
    }
  }
}

/** Sets the file's modification time as `touch -d` would. */
function touch(fs: MemoryFs, path: string, mtimeMs: number): void {
  const fd = fs.open(path, 'read');
  fs.setTimes(fd, mtimeMs);
  fs.close(fd);
}

describe('folder engine on a file system with coarse times', () => {
  it('keeps what each disk can hold, and never sends a cut time back', async () => {
    const a = new MemoryDevice(fine, room, 1, '/a/notes', '/a/state.log');
    const b = new MemoryDevice(fat, room, 2, '/b/notes', '/b/state.log');
    const at = 1_767_225_601_234;
    fine.writeFile('/a/notes/note.md', 'a note\n');
    touch(fine, '/a/notes/note.md', at);
    await a.start();
    await b.start();
    settle([a, b]);
    expect(fat.textAt('/b/notes/note.md')).toBe('a note\n');
    expect(fat.lstat('/b/notes/note.md').mtimeMs).toBe(1_767_225_600_000);
    const settled = updates;
    settle([a, b]);
    settle([a, b]);
    expect(updates).toBe(settled);
    expect(fine.lstat('/a/notes/note.md').mtimeMs).toBe(at);
    expect(b.lines.filter((line) => line.startsWith('sent'))).toEqual([]);

    // an edit on the coarse disk goes with its own (coarse) time
    fat.writeFile('/b/notes/note.md', 'a note\nedited on FAT\n');
    touch(fat, '/b/notes/note.md', 1_767_225_700_999);
    b.scan();
    settle([a, b]);
    expect(fine.textAt('/a/notes/note.md')).toBe('a note\nedited on FAT\n');
    expect(fine.lstat('/a/notes/note.md').mtimeMs).toBe(1_767_225_700_000);
    const edited = updates;
    settle([a, b]);
    expect(updates).toBe(edited);
    await a.stop();
    await b.stop();
  });
});
