import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { editText } from '../../client/folder/text-merge.ts';
import { dropTwins } from '../../client/folder/text-twins.ts';
import { editedApart } from './edited-apart.ts';
import { gitMergeAll } from './git-merge.ts';
import { edited, type LineEdit, scenario } from './note-edits.ts';

/**
 * The same change made on two devices at once, kept once as git keeps it: each device sends its
 * version as `sync` does, receives the others' and drops the twins; every device ends with
 * `git merge-file`'s result wherever git merges cleanly, and a text written twice on purpose
 * stays twice.
 */

const runs = Number(process.env.TEXT_MERGE_RUNS ?? 200);

/** Devices that edit `base` into `versions` at once, then exchange everything. */
function atOnce(base: string, versions: string[], drop: boolean): string[] {
  const docs = editedApart(base, versions);
  // Each device receives the others' updates, drops the twins, and sends that on.
  for (let round = 0; round < 2; round += 1) {
    for (const doc of docs) {
      for (const other of docs) if (other !== doc) Y.applyUpdate(doc, Y.encodeStateAsUpdate(other));
      if (drop) doc.transact(() => dropTwins(doc.getText('t')));
    }
  }
  return docs.map((doc) => doc.getText('t').toString());
}

describe('dropTwins', () => {
  it('keeps a word changed the same way on two devices once (t3 → t2 on both gave t2t2)', () => {
    expect(atOnce('t3\n', ['t2\n', 't2\n'], false)).toEqual(['t2t2\n', 't2t2\n']);
    expect(atOnce('t3\n', ['t2\n', 't2\n'], true)).toEqual(['t2\n', 't2\n']);
  });

  it('keeps a line added in the same place on three devices once', () => {
    const versions = ['a\nx\nb\n', 'a\nx\nb\n', 'a\nx\nb\nc\n'];
    expect(atOnce('a\nb\n', versions, true)).toEqual(Array(3).fill('a\nx\nb\nc\n'));
  });

  it('keeps a line written again on purpose after the other device’s was seen', () => {
    const a = new Y.Doc();
    a.getText('t').insert(0, 'a\nb\n');
    const b = new Y.Doc();
    Y.applyUpdate(b, Y.encodeStateAsUpdate(a));
    editText(a.getText('t'), 'a\nx\nb\n');
    Y.applyUpdate(b, Y.encodeStateAsUpdate(a));
    editText(b.getText('t'), 'a\nx\nx\nb\n');
    Y.applyUpdate(a, Y.encodeStateAsUpdate(b));
    for (const doc of [a, b]) {
      expect(dropTwins(doc.getText('t'))).toBe(0);
      expect(doc.getText('t').toString()).toBe('a\nx\nx\nb\n');
    }
  });

  it('leaves a twin that was edited since as it is', () => {
    const [a, b] = [new Y.Doc(), new Y.Doc()];
    a.getText('t').insert(0, 'a\nb\n');
    Y.applyUpdate(b, Y.encodeStateAsUpdate(a));
    editText(a.getText('t'), 'a\nx y\nb\n');
    editText(b.getText('t'), 'a\nx y\nb\n');
    editText(b.getText('t'), 'a\nx z y\nb\n');
    Y.applyUpdate(a, Y.encodeStateAsUpdate(b));
    expect(dropTwins(a.getText('t'))).toBe(0);
  });

  it(
    'gives git’s merge when devices make some of the same edits at once',
    () => {
      // Device 1 also makes some of device 0's edits, word for word.
      const shared = scenario.chain((run) =>
        fc
          .subarray([...run.edits[0]!.entries()])
          .map((copied) => ({ run, copied: new Map<number, LineEdit>(copied) })),
      );
      fc.assert(
        fc.property(shared, ({ run, copied }) => {
          fc.pre(copied.size > 0);
          const edits = run.edits.map((each, d) =>
            d === 1 ? new Map([...each, ...copied]) : each,
          );
          const versions = edits.map((each) => edited(run.note, each));
          const git = gitMergeAll(run.base, versions);
          fc.pre(git.clean);
          for (const text of atOnce(run.base, versions, process.env.NO_DROP === undefined))
            expect(text).toBe(git.text);
        }),
        { numRuns: runs },
      );
    },
    Math.max(20_000, runs * 30),
  );
});
