import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { applyClashFixes, clashFixes } from '../../client/folder/conflicts.ts';
import {
  addEntry,
  addVersion,
  type BlobVersion,
  entryOf,
  type FileEntry,
  newVersion,
} from '../../client/folder/document.ts';
import { EntryIndex } from '../../client/folder/entry-index.ts';

/**
 * Versions of a file kept as chunks, made apart on two devices (two Y.Docs that exchange
 * updates as the relay would carry them): each device settles them alone and both end with
 * the same document: the most recent edit at the name, the other under its conflict name,
 * or one version when the bytes are the same.
 */

function file(
  byte: string,
  size = 10,
): { size: number; digest: string; chunks: [string, number][] } {
  return { size, digest: byte.repeat(64), chunks: [[`s${byte.repeat(43)}`, size]] };
}

function entryAt(doc: Y.Doc, path: string): FileEntry[] {
  const entries: FileEntry[] = [];
  for (const [id, value] of doc.getMap<unknown>('files')) {
    const entry = entryOf(id, value);
    if (typeof entry === 'object' && entry.path === path) entries.push(entry);
  }
  return entries;
}

function exchange(a: Y.Doc, b: Y.Doc): void {
  Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)));
  Y.applyUpdate(a, Y.encodeStateAsUpdate(b, Y.encodeStateVector(a)));
}

/** What one device does after receiving: settles the clashes of every entry. */
function settle(doc: Y.Doc): void {
  const files = doc.getMap<unknown>('files');
  for (let round = 0; round < 3; round += 1) {
    const index = new EntryIndex(files);
    const fixes = clashFixes(index, [...files.keys()]);
    if (fixes.length === 0) return;
    doc.transact(() => applyClashFixes(index, fixes));
  }
}

/** Two devices with `photo.bin` at its first version; each then makes its own version apart. */
function madeApart(one: BlobVersion['digest'], two: BlobVersion['digest']) {
  const a = new Y.Doc();
  const b = new Y.Doc();
  a.transact(() =>
    addEntry(a.getMap('files'), {
      path: 'photo.bin',
      content: newVersion(file('0'), 'device-a', 1_000),
      device: 'device-a',
      time: 1_000,
    }),
  );
  exchange(a, b);
  const [atA] = entryAt(a, 'photo.bin');
  const [atB] = entryAt(b, 'photo.bin');
  a.transact(() => addVersion(atA!, newVersion(file(one), 'device-a', 2_000_000), true));
  b.transact(() => addVersion(atB!, newVersion(file(two), 'device-b', 3_000_000), true));
  exchange(a, b);
  return { a, b };
}

describe('versions of a file made apart', () => {
  it('are both kept: the most recent edit at the name, the other under its conflict name, alike on both devices', () => {
    const { a, b } = madeApart('a', 'b');
    expect(entryAt(a, 'photo.bin')[0]!.heads).toHaveLength(2);
    settle(a);
    settle(b);
    exchange(a, b);
    for (const doc of [a, b]) {
      const [kept] = entryAt(doc, 'photo.bin');
      expect(kept!.heads.map((v) => v.digest)).toEqual(['b'.repeat(64)]);
      const copies = entryAt(doc, 'photo.sync-conflict-19700101-003320-device-a.bin');
      expect(copies.map((entry) => entry.blob!.digest)).toEqual(['a'.repeat(64)]);
    }
    expect(Y.encodeStateVector(a)).toEqual(Y.encodeStateVector(b));
    expect(a.getMap('files').toJSON()).toEqual(b.getMap('files').toJSON());
  });

  it('leave one version when both devices made the same bytes', () => {
    const { a, b } = madeApart('c', 'c');
    settle(a);
    settle(b);
    exchange(a, b);
    for (const doc of [a, b]) {
      expect(doc.getMap('files').size).toBe(1);
      expect(entryAt(doc, 'photo.bin')[0]!.heads).toHaveLength(1);
    }
  });
});
