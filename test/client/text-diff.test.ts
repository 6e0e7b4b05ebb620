import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { diff, replaceText } from '../../client/cli/text-diff.ts';

function applied(from: string, to: string): string {
  const edit = diff(from, to);
  return from.slice(0, edit.start) + edit.insert + from.slice(edit.start + edit.deleteCount);
}

describe('text diff: the one replacement a local edit is sent as', () => {
  it('turns any text into any other (fast-check, surrogate pairs included)', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 60 }),
        fc.string({ unit: 'grapheme', maxLength: 60 }),
        (from, to) => {
          expect(applied(from, to)).toBe(to);
          const edit = diff(from, to);
          const low = (s: string, i: number) =>
            s.charCodeAt(i) >= 0xdc00 && s.charCodeAt(i) <= 0xdfff;
          expect(low(from, edit.start)).toBe(false);
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it('replaces whole words, so two devices rewriting one word at once keep both words', () => {
    expect(diff('a draft here\n', 'a final here\n')).toEqual({
      start: 2,
      deleteCount: 5,
      insert: 'final',
    });
    const base = new Y.Doc();
    base.getText('t').insert(0, 'status: t1\n');
    const one = new Y.Doc();
    const two = new Y.Doc();
    Y.applyUpdate(one, Y.encodeStateAsUpdate(base));
    Y.applyUpdate(two, Y.encodeStateAsUpdate(base));
    replaceText(one.getText('t'), 'status: t9\n');
    replaceText(two.getText('t'), 'status: t12\n');
    Y.applyUpdate(one, Y.encodeStateAsUpdate(two));
    Y.applyUpdate(two, Y.encodeStateAsUpdate(one));
    const merged = one.getText('t').toString();
    expect(merged).toBe(two.getText('t').toString());
    expect(merged.match(/t\d+/g)?.sort()).toEqual(['t12', 't9']);
  });

  it('keeps an append an append: a concurrent edit elsewhere is untouched', () => {
    expect(diff('one\ntwo\n', 'one\ntwo\nthree\n')).toEqual({
      start: 8,
      deleteCount: 0,
      insert: 'three\n',
    });
  });
});
