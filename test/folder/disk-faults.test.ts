import { describe, expect, it } from 'vitest';
import { tempSuffix } from '../../client/folder/disk.ts';
import { FaultFs, fsError } from './fault-fs.ts';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * The folder engine over a file system that fails: two engines in memory (no host, no disk),
 * the second one's calls going through a fault injector. After each fault, the folder's
 * invariant: nothing written outside the folder, nothing lost, and once the fault is gone both
 * folders hold the same files.
 */

function setup() {
  const fs = new MemoryFs();
  const faulty = new FaultFs(fs);
  const room = new MemoryRoom();
  const a = new MemoryDevice(fs, room, 1, '/a/notes', '/a/state.log');
  const b = new MemoryDevice(faulty, room, 2, '/b/notes', '/b/state.log');
  return { fs, faulty, a, b };
}

/** The synced files of a folder (no dot files), by path. */
function files(fs: MemoryFs, dir: string): Record<string, string> {
  const pairs = fs.tree(dir).filter(([path]) => !path.split('/').some((p) => p.startsWith('.')));
  return Object.fromEntries(pairs);
}

/** Delivers and scans until both folders hold the same files twice in a row; those files. */
function agreed(fs: MemoryFs, devices: MemoryDevice[]): Record<string, string> {
  let last = '';
  for (let round = 0; round < 20; round += 1) {
    for (const each of devices) {
      each.deliver();
      each.scan();
    }
    const listings = devices.map((each) => JSON.stringify(files(fs, each.dir)));
    const same = listings.every((l) => l === listings[0]);
    if (same && listings[0] === last && devices.every((each) => each.inbox.length === 0)) {
      return JSON.parse(last) as Record<string, string>;
    }
    last = same ? listings[0]! : '';
  }
  throw new Error(
    `the folders never agreed: ${devices.map((d) => JSON.stringify(files(fs, d.dir))).join(' / ')}`,
  );
}

/** Temporary files left anywhere under `dir`. */
function temps(fs: MemoryFs, dir: string): string[] {
  return fs
    .tree(dir)
    .map(([path]) => path)
    .filter((path) => path.endsWith(tempSuffix));
}

describe('folder engine: faults of the file system', () => {
  it('writes no byte outside the folder when a folder above a received file is swapped for a link', async () => {
    const { fs, faulty, a, b } = setup();
    fs.mkdir('/outside');
    await a.start();
    await b.start();
    const sent: Record<string, string> = {};
    for (let n = 1; n <= 5; n += 1) sent[`sub/race-${n}.txt`] = `the text of race ${n}\n`;
    for (const [path, text] of Object.entries(sent)) {
      fs.mkdir(`/a/notes/sub`, { recursive: true });
      fs.writeFile(`/a/notes/${path}`, text);
    }
    a.scan();
    // As the temporary file of the first received file is created, sub becomes a link outside.
    // Every call after that looks outside: not one byte may be there, even for a moment.
    let swapped = false;
    let mostOutside = 0;
    faulty.before = (call, path) => {
      const outside = fs.tree('/outside').reduce((sum, [, text]) => sum + text.length, 0);
      mostOutside = Math.max(mostOutside, outside);
      if (swapped || call !== 'open' || !path.startsWith('/b/notes/sub/')) return;
      swapped = true;
      fs.rename('/b/notes/sub', '/b/sub-moved');
      fs.symlink('/outside', '/b/notes/sub');
    };
    b.deliver();
    expect(swapped).toBe(true);
    expect(mostOutside).toBe(0);
    expect(fs.tree('/outside')).toEqual([]);
    // The link goes, the folder comes back: everything arrives, inside.
    faulty.before = undefined;
    fs.unlink('/b/notes/sub');
    fs.rename('/b/sub-moved', '/b/notes/sub');
    const both = agreed(fs, [a, b]);
    expect(both).toEqual(sent);
    expect(fs.tree('/outside')).toEqual([]);
    await a.stop();
    await b.stop();
  });

  it('writes a received file once the disk has room again, and leaves no temporary file', async () => {
    const { fs, faulty, a, b } = setup();
    await a.start();
    await b.start();
    let full = true;
    faulty.before = (call, path) => {
      if (full && call === 'write' && path.endsWith(tempSuffix)) throw fsError('ENOSPC', path);
    };
    fs.writeFile('/a/notes/note.md', 'written while the other disk is full\n');
    a.scan();
    b.deliver();
    expect(files(fs, '/b/notes')).toEqual({});
    expect(temps(fs, '/b/notes')).toEqual([]);
    expect(b.lines.some((line) => line.includes('ENOSPC'))).toBe(true);
    full = false;
    expect(agreed(fs, [a, b])).toEqual({ 'note.md': 'written while the other disk is full\n' });
    expect(temps(fs, '/b/notes')).toEqual([]);
    await a.stop();
    await b.stop();
  });

  it('skips a file it may not read, deletes it nowhere, and sends it once it may', async () => {
    const { fs, faulty, a, b } = setup();
    await a.start();
    await b.start();
    fs.writeFile('/b/notes/shared.md', 'one\n');
    b.scan();
    expect(agreed(fs, [a, b])).toEqual({ 'shared.md': 'one\n' });
    let refused = true;
    faulty.before = (call, path) => {
      if (refused && call === 'open' && path.endsWith('shared.md')) throw fsError('EACCES', path);
    };
    fs.writeFile('/b/notes/shared.md', 'one\ntwo\n');
    for (let round = 0; round < 3; round += 1) {
      b.scan();
      a.deliver();
      a.scan();
    }
    expect(b.lines.some((line) => line.includes('EACCES'))).toBe(true);
    // A's copy as it was, nothing deleted anywhere; B's as the user left it.
    expect(files(fs, '/a/notes')).toEqual({ 'shared.md': 'one\n' });
    expect(fs.textAt('/b/notes/shared.md')).toBe('one\ntwo\n');
    refused = false;
    b.scan();
    expect(agreed(fs, [a, b])).toEqual({ 'shared.md': 'one\ntwo\n' });
    await a.stop();
    await b.stop();
  });

  it('reads and writes whole files through short reads and writes', async () => {
    const { fs, faulty, a, b } = setup();
    faulty.chunk = 3;
    await a.start();
    await b.start();
    const text = 'naïve Straße 日本語 😀\n'.repeat(20);
    fs.writeFile('/a/notes/unicode.md', text);
    fs.writeFile('/b/notes/back.md', `${text}from b\n`);
    a.scan();
    b.scan();
    expect(agreed(fs, [a, b])).toEqual({ 'back.md': `${text}from b\n`, 'unicode.md': text });
    await a.stop();
    await b.stop();
  });

  it('sends the text a file has when it is read, also when it changed since its stat', async () => {
    const { fs, faulty, a, b } = setup();
    await a.start();
    await b.start();
    fs.writeFile('/b/notes/draft.md', 'first version\n');
    let edited = false;
    faulty.before = (call, path) => {
      if (edited || call !== 'open' || !path.endsWith('draft.md')) return;
      edited = true;
      fs.writeFile('/b/notes/draft.md', 'second version, saved between the stat and the read\n');
    };
    b.scan();
    expect(edited).toBe(true);
    faulty.before = undefined;
    expect(agreed(fs, [a, b])).toEqual({
      'draft.md': 'second version, saved between the stat and the read\n',
    });
    await a.stop();
    await b.stop();
  });

  it('changes no file while its state log cannot be written, and catches up after', async () => {
    const { fs, faulty, a, b } = setup();
    await a.start();
    await b.start();
    let broken = true;
    faulty.before = (call, path) => {
      if (broken && (call === 'write' || call === 'open') && path === '/b/state.log') {
        throw fsError('EIO', path);
      }
    };
    fs.writeFile('/a/notes/plan.md', 'the plan\n');
    a.scan();
    b.deliver();
    expect(files(fs, '/b/notes')).toEqual({});
    expect(b.lines.some((line) => line.includes('EIO'))).toBe(true);
    broken = false;
    expect(agreed(fs, [a, b])).toEqual({ 'plan.md': 'the plan\n' });
    await a.stop();
    await b.stop();
  });

  it('keeps in its state log what a failed write of it held, so nothing is sent again after a kill', async () => {
    const { fs, faulty, a, b } = setup();
    await a.start();
    await b.start();
    fs.writeFile('/b/notes/doc.md', 'one\n');
    b.scan();
    expect(agreed(fs, [a, b])).toEqual({ 'doc.md': 'one\n' });
    let broken = true;
    faulty.before = (call, path) => {
      if (broken && call === 'write' && path === '/b/state.log') throw fsError('EIO', path);
    };
    fs.writeFile('/b/notes/doc.md', 'one\ntwo\n');
    b.scan(); // sent; its record could not be written
    broken = false;
    fs.writeFile('/b/notes/other.md', 'another file\n');
    b.scan(); // the log works again
    await b.kill();
    const before = b.lines.length;
    await b.start();
    expect(b.lines.slice(before).filter((line) => line.startsWith('sent'))).toEqual([]);
    expect(agreed(fs, [a, b])).toEqual({ 'doc.md': 'one\ntwo\n', 'other.md': 'another file\n' });
    await a.stop();
    await b.stop();
  });
});
