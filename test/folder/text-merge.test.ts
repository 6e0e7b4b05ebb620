import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import {
  applyEdits,
  editsInto,
  editText,
  merge3,
  mergeEdits,
  textEdits,
} from '../../client/folder/text-merge.ts';
import { editedApart } from './edited-apart.ts';
import { gitMergeAll, linesWithEnds } from './git-merge.ts';
import { scenario } from './note-edits.ts';

/**
 * The text merge against `git merge-file`: random notes (words, unicode, blank and repeated
 * lines, CRLF, no final newline) edited by two or three devices, each in lines of its own. Where
 * git merges cleanly, the merge in text (`merge3`) and the merge of the devices' edits in the
 * shared text (Yjs, as `sync` sends them) both give git's result byte for byte; where git
 * reports a conflict (neighbouring lines, one line changed in two places), every edit is kept
 * once, and no line that no device changed is lost, doubled or joined to another.
 */

/** Each device's version sent as `sync` sends it, all merged in the shared text. */
function mergedAsCrdt(base: string, versions: string[]): string {
  const docs = editedApart(base, versions);
  for (const doc of docs)
    for (const other of docs) Y.applyUpdate(doc, Y.encodeStateAsUpdate(other));
  const texts = docs.map((doc) => doc.getText('t').toString());
  for (const text of texts) expect(text).toBe(texts[0]);
  return texts[0]!;
}

function mergeAll(base: string, versions: string[]): string {
  return versions.slice(1).reduce((merged, version) => merge3(base, merged, version), versions[0]!);
}

/**
 * No line that no device changed is lost, doubled or joined: each is whole, once, in order. With
 * `joinable`, a line may be joined to words another device added next to it (never doubled):
 * what the shared text gives when one device removes a line end while another adds text beside
 * it, at the same moment (git reports a conflict there).
 */
function expectUntouchedLines(untouched: string[], merged: string, joinable = false): void {
  const lines = linesWithEnds(merged).map((line) => line.replace(/\r?\n$/, ''));
  const kept = untouched.filter((l) => l !== '');
  const counts = new Map<string, number>();
  for (const line of kept) counts.set(line, (counts.get(line) ?? 0) + 1);
  for (const [line, count] of counts) {
    const copies = lines.filter((l) => l === line).length;
    if (joinable) expect(copies, `copies of ${JSON.stringify(line)}`).toBeLessThanOrEqual(count);
    else
      expect(copies, `copies of ${JSON.stringify(line)} in ${JSON.stringify(merged)}`).toBe(count);
  }
  if (joinable) return;
  // Blank lines are left out: which of two neighbouring blank lines a device kept is not seen.
  let at = 0;
  for (const line of kept) {
    const found = lines.indexOf(line, at);
    expect(
      found,
      `line ${JSON.stringify(line)} in ${JSON.stringify(merged)}`,
    ).toBeGreaterThanOrEqual(at);
    at = found + 1;
  }
}

/** Lines of unique words `t<n>`, and two sides' edits of them that may overlap and touch. */
const overlappingEdits = fc
  .record({
    lines: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 6 }),
    ours: fc.array(fc.tuple(fc.nat(), fc.nat(4)), { maxLength: 4 }),
    theirs: fc.array(fc.tuple(fc.nat(), fc.nat(4)), { maxLength: 4 }),
  })
  .map(({ lines, ours, theirs }) => {
    let next = 0;
    const fresh = () => {
      next += 1;
      return `t${next}`;
    };
    const baseLines = lines.map((words) => Array.from({ length: words }, fresh));
    const edit = (steps: [number, number][]) => {
      const out = baseLines.map((line) => [...line]);
      for (const [at, how] of steps) {
        const line = out[at % out.length]!;
        const word = at % Math.max(1, line.length);
        if (how === 0) out.splice(at % (out.length + 1), 0, [fresh()]);
        else if (how === 1 && out.length > 1) out.splice(at % out.length, 1);
        else if (how === 2 && line.length > 0) line[word] = fresh();
        else if (how === 3 && line.length > 0) line[word] = `${line[word]}${fresh()}`;
        else line.splice(word, 0, fresh());
      }
      return out.map((line) => `${line.join(' ')}\n`).join('');
    };
    return { base: edit([]), ours: edit(ours), theirs: edit(theirs) };
  });

function wordsIn(text: string): string[] {
  return text.match(/t\d+/g) ?? [];
}

/** The word `t<n>` alone, not the start of `t<n><m>`. */
function wordOf(word: string): RegExp {
  return new RegExp(`${word}(?!\\d)`, 'g');
}

function expectEveryWordOnce(words: string[], merged: string): void {
  for (const word of words) {
    expect(merged.split(word).length - 1, `${word} in ${JSON.stringify(merged)}`).toBe(1);
  }
}

describe('text merge: edits region by region, checked against git merge-file', () => {
  it('turns any text into any other, never splitting a surrogate pair', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 80 }),
        fc.string({ unit: 'grapheme', maxLength: 80 }),
        (from, to) => {
          const edits = textEdits(from, to);
          expect(applyEdits(from, edits)).toBe(to);
          const doc = new Y.Doc();
          doc.getText('t').insert(0, from);
          editText(doc.getText('t'), to);
          expect(doc.getText('t').toString()).toBe(to);
          let end = 0;
          for (const edit of edits) {
            expect(edit.at).toBeGreaterThanOrEqual(end);
            end = edit.at + edit.remove;
            const low = (s: string, i: number) =>
              s.charCodeAt(i) >= 0xdc00 && s.charCodeAt(i) <= 0xdfff;
            expect(low(from, edit.at) || low(from, end)).toBe(false);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('sends each changed region as its own edit, never one span from the first change to the last', () => {
    const base = 'one\ntwo\nthree\nfour\n';
    expect(textEdits(base, 'one!\ntwo\nthree\nfour?\n')).toEqual([
      { at: 3, remove: 0, insert: '!' },
      { at: 18, remove: 0, insert: '?' },
    ]);
    expect(textEdits(base, 'one\nTWO\nthree\n')).toEqual([
      { at: 4, remove: 3, insert: 'TWO' },
      { at: 14, remove: 5, insert: '' },
    ]);
  });

  it("gives git's result wherever git merges cleanly, in text and in the shared text; every edit once otherwise", () => {
    let clean = 0;
    fc.assert(
      fc.property(scenario, ({ base, versions, untouched, words: added }) => {
        const git = gitMergeAll(base, versions);
        const text = mergeAll(base, versions);
        const crdt = mergedAsCrdt(base, versions);
        if (git.clean) {
          clean += 1;
          expect(text).toBe(git.text);
          expect(crdt).toBe(git.text);
        }
        expectUntouchedLines(untouched, text);
        expectUntouchedLines(untouched, crdt, !git.clean);
        expectEveryWordOnce(added, text);
        expectEveryWordOnce(added, crdt);
      }),
      { numRuns: Number(process.env.TEXT_MERGE_RUNS ?? 400) },
    );
    // The property must have met git's clean merges, not only its conflicts.
    expect(clean).toBeGreaterThan(100);
  }, 300_000);

  it('merges a device that saw the others first three ways, as git does', () => {
    fc.assert(
      fc.property(scenario, ({ base, versions }) => {
        const git = gitMergeAll(base, versions);
        if (!git.clean) return;
        // The last device's file was saved from the base while the others' edits reached its
        // document: it merges base, file and document, and sends the difference.
        const others = mergedAsCrdt(base, versions.slice(0, -1));
        const doc = new Y.Doc();
        doc.getText('t').insert(0, others);
        // As the folder sync does it: the merge's edits of the document, made in it.
        editsInto(doc.getText('t'), mergeEdits(base, versions.at(-1)!, others));
        expect(doc.getText('t').toString()).toBe(git.text);
        expect(merge3(base, versions.at(-1)!, others)).toBe(git.text);
      }),
      { numRuns: Number(process.env.TEXT_MERGE_RUNS ?? 300) },
    );
  }, 300_000);

  it('keeps a change made the same way on both sides once, as git does', () => {
    const base = 'a\nteh b\nc\n';
    expect(merge3(base, 'a\nthe b\nc\n', 'a\nthe b\nc!\n')).toBe('a\nthe b\nc!\n');
  });

  it('keeps both words when two devices rewrite the same word two ways (t1 → t9 and t1 → t12)', () => {
    expect(merge3('status: t1\n', 'status: t9\n', 'status: t12\n')).toBe('status: t9t12\n');
    const merged = mergedAsCrdt('status: t1\n', ['status: t9\n', 'status: t12\n']);
    expect(merged.match(/t\d+/g)?.sort()).toEqual(['t12', 't9']);
  });

  it('keeps a line added before a word the other side rewrote, and the rewrite, once each', () => {
    // One side rewrote `t3` (into `t3t2`, as after an earlier conflict); the other added a line
    // above it. The two changes meet and do not overlap: both kept, `t3` once.
    expect(merge3('t3\n', 't5\nt3\n', 't3t2\n')).toBe('t5\nt3t2\n');
    expect(merge3('t3\n', 't3t2\n', 't5\nt3\n')).toBe('t5\nt3t2\n');
    expect(merge3('a t3 b\n', 'a t3 t9 b\n', 'a t3x b\n')).toBe('a t3x t9 b\n');
  });

  it('keeps every word once whatever two devices change, and both texts where they overlap', () => {
    fc.assert(
      fc.property(overlappingEdits, ({ base, ours, theirs }) => {
        const merged = merge3(base, ours, theirs);
        const count = (text: string, word: string) => text.match(wordOf(word))?.length ?? 0;
        const whole = (text: string, word: string) => text.split(/\s/).includes(word);
        for (const word of new Set(wordsIn(base + ours + theirs))) {
          const found = count(merged, word);
          const detail = `${word} in ${JSON.stringify({ base, ours, theirs, merged })}`;
          if (count(base, word) === 0) {
            // A word one side added is there once.
            expect(found, detail).toBe(1);
          } else if (whole(ours, word) && whole(theirs, word)) {
            // A word neither side touched is there once.
            expect(found, detail).toBe(1);
          } else {
            // A word both sides changed two ways may be in both of their texts, side by side.
            expect(found, detail).toBeLessThanOrEqual(count(ours, word) + count(theirs, word));
          }
        }
      }),
      { numRuns: Number(process.env.TEXT_MERGE_RUNS ?? 400) },
    );
  });

  it('keeps an edit of a line another device deleted, as a whole line', () => {
    const base = 'one\ntwo\nthree\n';
    expect(merge3(base, 'one\nthree\n', 'one\ntwo more\nthree\n')).toBe('one\ntwo more\nthree\n');
  });
});
