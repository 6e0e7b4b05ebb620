import { describe, expect, it } from 'vitest';
import { folderMarker } from '../../client/folder/marker.ts';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * The folder marker: a folder emptied or removed (a disk not mounted, an `rm -rf`) sends no
 * delete; and doing what `sync` then says, making the marker again by hand in the empty folder,
 * starts the folder afresh: the files come back from the other devices, none is deleted
 * anywhere. Two engines in memory (no host, no disk).
 */

async function pair() {
  const fs = new MemoryFs();
  const room = new MemoryRoom();
  const a = new MemoryDevice(fs, room, 1, '/a/notes', '/a/state.log');
  const b = new MemoryDevice(fs, room, 2, '/b/notes', '/b/state.log');
  await a.start();
  await b.start();
  for (let n = 1; n <= 5; n += 1) fs.writeFile(`/a/notes/note-${n}.md`, `note ${n}\n`);
  a.scan();
  settle([a, b]);
  return { fs, a, b };
}

function settle(devices: MemoryDevice[]): void {
  for (let round = 0; round < 5; round += 1) {
    for (const each of devices) {
      each.deliver();
      each.scan();
    }
  }
}

const notes = (fs: MemoryFs, dir: string) =>
  fs
    .tree(dir)
    .filter(([path]) => !path.startsWith('.'))
    .map(([path]) => path);
const five = ['note-1.md', 'note-2.md', 'note-3.md', 'note-4.md', 'note-5.md'];

describe('folder engine: the folder marker', () => {
  it('starts afresh when the marker is made again by hand in the emptied folder: nothing deleted anywhere', async () => {
    const { fs, a, b } = await pair();
    expect(notes(fs, '/b/notes')).toEqual(five);
    fs.removeAll('/b/notes');
    fs.mkdir('/b/notes');
    settle([a, b]);
    expect(notes(fs, '/a/notes')).toEqual(five);
    expect(b.lines.some((line) => line.includes('is gone or not mounted'))).toBe(true);
    // What the line says: the marker again, by hand.
    fs.writeFile(`/b/notes/${folderMarker}`, '');
    settle([a, b]);
    expect(notes(fs, '/a/notes')).toEqual(five);
    expect(notes(fs, '/b/notes')).toEqual(five);
    expect(b.lines.some((line) => line.includes('starts afresh'))).toBe(true);
    await a.stop();
    await b.stop();
  });

  it('does the same when the marker was made again while sync was stopped', async () => {
    const { fs, a, b } = await pair();
    await b.stop();
    fs.removeAll('/b/notes');
    fs.mkdir('/b/notes');
    fs.writeFile(`/b/notes/${folderMarker}`, 'made by hand\n');
    await b.start();
    settle([a, b]);
    expect(notes(fs, '/a/notes')).toEqual(five);
    expect(notes(fs, '/b/notes')).toEqual(five);
    await a.stop();
    await b.stop();
  });

  it('keeps a folder whose marker is its own as it is, across restarts', async () => {
    const { fs, a, b } = await pair();
    await b.stop();
    await b.start();
    fs.unlink('/b/notes/note-2.md'); // a real delete
    b.scan();
    settle([a, b]);
    expect(notes(fs, '/a/notes')).toEqual(five.filter((n) => n !== 'note-2.md'));
    expect(b.lines.some((line) => line.includes('starts afresh'))).toBe(false);
    await a.stop();
    await b.stop();
  });
});
