import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { closestVersion, textVersions } from '../../client/folder/ancestors.ts';
import { addEntry, folderDocName } from '../../client/folder/document.ts';
import { merge3 } from '../../client/folder/text-merge.ts';
import { gitMerge } from './git-merge.ts';

/**
 * The common ancestor a first `sync` merges a file from: the versions a text had in the host's
 * history, and the one a file found here was made from, checked against `git merge-file` from
 * the version it truly was made from.
 */

const v0 = `${Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n')}\n`;

function withLines(text: string, edits: Record<number, string>): string {
  return text
    .split('\n')
    .map((line, i) => edits[i + 1] ?? line)
    .join('\n');
}

describe('textVersions', () => {
  it('gives every text an entry had through the updates, from its creation, each once', () => {
    const doc = new Y.Doc();
    const files = doc.getMap<unknown>(folderDocName);
    const updates: Uint8Array[] = [];
    doc.on('update', (update: Uint8Array) => updates.push(update));
    const id = addEntry(files, { path: 'a.md', content: 'one\n', device: '1', time: 1 });
    const other = addEntry(files, { path: 'b.md', content: 'other\n', device: '1', time: 1 });
    const text = (files.get(id) as Y.Map<unknown>).get('text') as Y.Text;
    text.insert(4, 'two\n');
    (files.get(other) as Y.Map<unknown>).set('time', 2);
    text.delete(4, 4);
    expect(textVersions(updates, [id])).toEqual(new Map([[id, ['one\n', 'one\ntwo\n']]]));
  });
});

describe('closestVersion', () => {
  it('takes the version a file was made from, then merges as git does from it', () => {
    const v1 = withLines(v0, { 3: 'line 3 changed' });
    const v2 = withLines(v1, { 9: 'line 9 changed' });
    const here = withLines(v1, { 5: 'line 5 edited here' });
    expect(closestVersion([v0, v1, v2], here)).toBe(v1);
    expect(merge3(v1, here, v2)).toBe(gitMerge(v1, here, v2).text);
  });

  it('takes an old copy with no edit of its own as that version: the merge gives the text as it is now', () => {
    const v1 = withLines(v0, { 3: 'line 3 changed' });
    expect(closestVersion([v0, v1], v0)).toBe(v0);
    expect(merge3(v0, v0, v1)).toBe(v1);
  });

  it('never takes a later version that the file would undo a change of', () => {
    // The file was made from v1, which the history no longer holds (it kept v0 and v2).
    const v1 = withLines(v0, { 3: 'line 3 changed', 4: 'line 4 changed' });
    const v2 = withLines(v1, { 9: 'line 9 changed' });
    const here = withLines(v1, { 5: 'line 5 edited here' });
    const base = closestVersion([v0, v2], here);
    expect(base).toBe(v0);
    const git = gitMerge(v1, here, v2);
    expect(git.clean).toBe(true);
    expect(merge3(base!, here, v2)).toBe(git.text);
  });

  it('finds none for a file that keeps less than half the lines of every version', () => {
    expect(closestVersion([v0], 'a note of its own\nline 1\n')).toBeUndefined();
    expect(closestVersion([], v0)).toBeUndefined();
  });
});
