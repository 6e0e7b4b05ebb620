import { diffArrays } from 'diff';
import type * as Y from 'yjs';

/**
 * How a text changed on one device becomes edits that merge with the other devices' edits.
 *
 * A change is found line by line first (as `git merge-file` does), then inside each changed run
 * of lines word by word (whole words matched first, so a word is never taken for removed and
 * added again elsewhere): every separate changed region is its own edit, so a concurrent edit
 * elsewhere in the text, even in the same line, is never deleted and inserted again around it.
 * Lines added or removed whole are added or removed with their line ends; an edit inside a line
 * never touches the line's end, so a merge cannot join two lines. Words, not characters: two
 * devices that rewrite the same word at once keep both words (`t1` edited to `t9` and to `t12`
 * gives `t9t12`), never a mix of their letters (`t92`).
 *
 * `merge3` is the same merge done on plain strings, for a device that holds both sides at once
 * (a file changed on disk while other devices' edits arrived): where git merges cleanly, it
 * gives git's result; where the two sides change neighbouring lines or one line in different
 * places, every edit once in place; where both change the same words two ways, both texts side
 * by side (this device's first), and no word twice that neither side wrote twice. It is what
 * the shared text gives when the two sides' edits meet as a CRDT, except that a change made
 * identically on both sides is kept once here, and an edit of a line the other side deleted
 * keeps the whole line.
 */

/** One replacement in a text: `remove` code units at `at`, then `insert` there. */
export interface TextEdit {
  at: number;
  remove: number;
  insert: string;
}

/** A changed run: `[aStart, aEnd)` of the old units became `[bStart, bEnd)` of the new. */
interface Hunk {
  aStart: number;
  aEnd: number;
  bStart: number;
  bEnd: number;
}

/** The lines of a text, each with its line end (`\n` or `\r\n`); the last may have none. */
export function linesOf(text: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (;;) {
    const end = text.indexOf('\n', start);
    if (end === -1) break;
    lines.push(text.slice(start, end + 1));
    start = end + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

/**
 * Words (letters, digits and marks), runs of spaces, line ends and single other characters: the
 * units a change inside a line is found in. A surrogate pair is one unit.
 */
const tokenPattern = /\r\n|\n|[\p{L}\p{N}\p{M}_]+|[^\S\r\n]+|[\s\S]/gu;

function tokensOf(text: string): string[] {
  return text.match(tokenPattern) ?? [];
}

/**
 * A diff of two lists as runs kept, removed and added, in order (jsdiff's `diffArrays` by
 * default: the benchmark compares others through this).
 */
export type ListDiff = (
  a: string[],
  b: string[],
) => { added?: boolean; removed?: boolean; value: string[] }[];

/** The changed runs between two lists, after their common start and end are set aside. */
function hunksOf(a: string[], b: string[], listDiff: ListDiff = diffArrays): Hunk[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head += 1;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) {
    tail += 1;
  }
  const hunks: Hunk[] = [];
  if (head === a.length - tail && head === b.length - tail) return hunks;
  let i = head;
  let j = head;
  let open: Hunk | undefined;
  const middle = listDiff(a.slice(head, a.length - tail), b.slice(head, b.length - tail));
  for (const part of middle) {
    const count = part.value.length;
    if (!part.added && !part.removed) {
      if (open !== undefined) hunks.push(open);
      open = undefined;
      i += count;
      j += count;
      continue;
    }
    open ??= { aStart: i, aEnd: i, bStart: j, bEnd: j };
    if (part.removed) {
      i += count;
      open.aEnd = i;
    } else {
      j += count;
      open.bEnd = j;
    }
  }
  if (open !== undefined) hunks.push(open);
  return slideDown(hunks, a, b);
}

/**
 * Moves each run that only adds or only removes units as far down as equal units allow, as git
 * does (deleting one of two equal lines deletes the second): a merge then meets git's hunks,
 * not others of the same text that touch a change git sees as apart.
 */
function slideDown(hunks: Hunk[], a: string[], b: string[]): Hunk[] {
  for (let k = 0; k < hunks.length; k += 1) {
    const hunk = hunks[k]!;
    const limit = hunks[k + 1]?.aStart ?? a.length;
    if (hunk.bStart === hunk.bEnd) {
      while (hunk.aEnd < limit && a[hunk.aStart] === a[hunk.aEnd]) {
        hunk.aStart += 1;
        hunk.aEnd += 1;
        hunk.bStart += 1;
        hunk.bEnd += 1;
      }
    } else if (hunk.aStart === hunk.aEnd) {
      while (hunk.aEnd < limit && b[hunk.bStart] === b[hunk.bEnd]) {
        hunk.aStart += 1;
        hunk.aEnd += 1;
        hunk.bStart += 1;
        hunk.bEnd += 1;
      }
    }
  }
  return hunks;
}

/**
 * Where each word of `tokens` starts: a word, or a single other character, with the spaces and
 * the one line end after it; spaces and line ends after none (a blank line, an indent) are a
 * word of their own.
 */
function wordStarts(tokens: string[]): number[] {
  const starts: number[] = [];
  let trailing = false; // inside the spaces after a word, before its line end
  for (let k = 0; k < tokens.length; k += 1) {
    const token = tokens[k]!;
    const lineEnd = token === '\n' || token === '\r\n';
    if (!(trailing && /^\s/.test(token))) starts.push(k);
    trailing = !lineEnd && (!/^\s/.test(token) || trailing);
  }
  starts.push(tokens.length);
  return starts;
}

/**
 * The changed runs between two lists of tokens, found word by word first (a word with the spaces
 * and line end after it is one unit), then token by token inside each changed run of words. A
 * diff of tokens alone may keep a line end or a space and take a word for removed and added again
 * elsewhere (equally long, for the diff); a merge of two such diffs then holds the word twice.
 * Matching whole words first keeps each word where it is; the hunks are still of tokens, so an
 * edit of a line's last word leaves its line end alone.
 */
function wordHunksOf(x: string[], y: string[], listDiff?: ListDiff): Hunk[] {
  const xStarts = wordStarts(x);
  const yStarts = wordStarts(y);
  const wordsOf = (tokens: string[], starts: number[]) =>
    starts.slice(0, -1).map((start, k) => tokens.slice(start, starts[k + 1]).join(''));
  const hunks: Hunk[] = [];
  for (const run of hunksOf(wordsOf(x, xStarts), wordsOf(y, yStarts), listDiff)) {
    const aStart = xStarts[run.aStart]!;
    const aEnd = xStarts[run.aEnd]!;
    const bStart = yStarts[run.bStart]!;
    const bEnd = yStarts[run.bEnd]!;
    if (aStart === aEnd || bStart === bEnd) {
      hunks.push({ aStart, aEnd, bStart, bEnd });
      continue;
    }
    for (const hunk of hunksOf(x.slice(aStart, aEnd), y.slice(bStart, bEnd), listDiff)) {
      hunks.push({
        aStart: aStart + hunk.aStart,
        aEnd: aStart + hunk.aEnd,
        bStart: bStart + hunk.bStart,
        bEnd: bStart + hunk.bEnd,
      });
    }
  }
  return hunks;
}

/** Offsets of each unit's start, and the total length at the end. */
function offsetsOf(units: string[]): number[] {
  const offsets = new Array<number>(units.length + 1);
  let at = 0;
  for (let k = 0; k < units.length; k += 1) {
    offsets[k] = at;
    at += units[k]!.length;
  }
  offsets[units.length] = at;
  return offsets;
}

/**
 * The edits that turn `from` into `to`, in order of position in `from`, none overlapping: each
 * changed run of whole lines added or removed as lines, each other changed run of lines
 * refined to the words that changed.
 */
export function textEdits(from: string, to: string, listDiff?: ListDiff): TextEdit[] {
  if (from === to) return [];
  const a = linesOf(from);
  const b = linesOf(to);
  const aAt = offsetsOf(a);
  const bAt = offsetsOf(b);
  const edits: TextEdit[] = [];
  for (const hunk of hunksOf(a, b, listDiff)) {
    const at = aAt[hunk.aStart]!;
    const removed = from.slice(at, aAt[hunk.aEnd]);
    const inserted = to.slice(bAt[hunk.bStart], bAt[hunk.bEnd]);
    if (removed === '' || inserted === '') {
      edits.push({ at, remove: removed.length, insert: inserted });
      continue;
    }
    const x = tokensOf(removed);
    const y = tokensOf(inserted);
    const xAt = offsetsOf(x);
    const yAt = offsetsOf(y);
    for (const word of wordHunksOf(x, y, listDiff)) {
      edits.push({
        at: at + xAt[word.aStart]!,
        remove: xAt[word.aEnd]! - xAt[word.aStart]!,
        insert: inserted.slice(yAt[word.bStart], yAt[word.bEnd]),
      });
    }
  }
  return edits;
}

/** `text` with `edits` (in order, not overlapping) made. */
export function applyEdits(text: string, edits: TextEdit[]): string {
  const parts: string[] = [];
  let at = 0;
  for (const edit of edits) {
    parts.push(text.slice(at, edit.at), edit.insert);
    at = edit.at + edit.remove;
  }
  parts.push(text.slice(at));
  return parts.join('');
}

/**
 * Edits the shared `text` into `content` with the edits `textEdits` finds.
 */
export function editText(text: Y.Text, content: string, listDiff?: ListDiff): void {
  const current = text.toString();
  if (current.length !== text.length) {
    // Embeds (which no device of ours makes) count in the indices and not in the string: the
    // positions would be off, so the whole text is replaced.
    text.delete(0, text.length);
    text.insert(0, content);
    return;
  }
  editsInto(text, textEdits(current, content, listDiff));
}

/**
 * Makes `edits` (positions in the text as it is, in order, not overlapping) in the shared
 * `text`, inside the caller's transaction if any: the last first, so that each edit's position
 * still holds.
 */
export function editsInto(text: Y.Text, edits: TextEdit[]): void {
  const apply = () => {
    for (let k = edits.length - 1; k >= 0; k -= 1) {
      const edit = edits[k]!;
      // Inserted after what it replaces, then that removed: a replaced first word of a line
      // stays in its line when another device adds a line before it at the same moment.
      if (edit.insert !== '') text.insert(edit.at + edit.remove, edit.insert);
      if (edit.remove > 0) text.delete(edit.at, edit.remove);
    }
  };
  if (text.doc === null) apply();
  else text.doc.transact(apply);
}

/** Each side's changed runs over one base, both in base order. */
interface Sides<T> {
  base: T[];
  ours: T[];
  theirs: T[];
  oursHunks: Hunk[];
  theirsHunks: Hunk[];
}

/** A changed run of the base: where it starts, and each side's changed runs inside it. */
interface Run {
  start: number;
  ours: Hunk[];
  theirs: Hunk[];
}

/** Who changed a run of the base: one side, both the same way, or both differently. */
type Change = 'ours' | 'theirs' | 'same' | 'clash';

/**
 * Walks the base with both sides' changes: calls `keep` for a base run neither changed and
 * `change` for a run one side or both changed (both differently: `clash`, when their changes
 * overlap or touch as git counts it, a change that ends where the other starts), each with the
 * units of base, ours and theirs it spans.
 */
function walk<T>(
  sides: Sides<T>,
  same: (x: T[], y: T[]) => boolean,
  out: {
    keep(units: T[]): void;
    change(b: T[], o: T[], t: T[], who: Change, run: Run): void;
  },
): void {
  const { base, ours, theirs, oursHunks, theirsHunks } = sides;
  let i = 0; // next ours hunk
  let j = 0; // next theirs hunk
  let at = 0; // base position walked up to
  let oShift = 0; // ours position minus base position, after the hunks passed
  let tShift = 0;
  while (i < oursHunks.length || j < theirsHunks.length) {
    const start = Math.min(oursHunks[i]?.aStart ?? Infinity, theirsHunks[j]?.aStart ?? Infinity);
    out.keep(base.slice(at, start));
    // Grow the run while a hunk of either side starts inside it or where it ends.
    let end = start;
    const oFrom = i;
    const tFrom = j;
    for (;;) {
      const no = oursHunks[i];
      const nt = theirsHunks[j];
      if (no !== undefined && no.aStart <= end) {
        end = Math.max(end, no.aEnd);
        i += 1;
      } else if (nt !== undefined && nt.aStart <= end) {
        end = Math.max(end, nt.aEnd);
        j += 1;
      } else break;
    }
    const oStart = start + oShift;
    const tStart = start + tShift;
    for (let k = oFrom; k < i; k += 1) {
      const h = oursHunks[k]!;
      oShift += h.bEnd - h.bStart - (h.aEnd - h.aStart);
    }
    for (let k = tFrom; k < j; k += 1) {
      const h = theirsHunks[k]!;
      tShift += h.bEnd - h.bStart - (h.aEnd - h.aStart);
    }
    const b = base.slice(start, end);
    const o = ours.slice(oStart, end + oShift);
    const t = theirs.slice(tStart, end + tShift);
    const who: Change =
      j === tFrom ? 'ours' : i === oFrom ? 'theirs' : same(o, t) ? 'same' : 'clash';
    out.change(b, o, t, who, {
      start,
      ours: oursHunks.slice(oFrom, i),
      theirs: theirsHunks.slice(tFrom, j),
    });
    at = end;
  }
  out.keep(base.slice(at));
}

function sameUnits(x: string[], y: string[]): boolean {
  return x.length === y.length && x.every((unit, k) => unit === y[k]);
}

function sidesOf(
  base: string[],
  ours: string[],
  theirs: string[],
  diff: (a: string[], b: string[]) => Hunk[] = hunksOf,
): Sides<string> {
  return { base, ours, theirs, oursHunks: diff(base, ours), theirsHunks: diff(base, theirs) };
}

/**
 * A run of lines both sides changed differently, merged word by word: each side's change kept
 * where the other left the words alone, and where both changed the same words two ways, both
 * texts side by side (ours first).
 */
function mergeWords(base: string, ours: string, theirs: string): string {
  const sides = sidesOf(tokensOf(base), tokensOf(ours), tokensOf(theirs), wordHunksOf);
  const out: string[] = [];
  const push = (units: string[]) => {
    for (const unit of units) out.push(unit);
  };
  walk(sides, sameUnits, {
    keep: push,
    change: (b, o, t, who, run) => {
      if (who === 'clash') push(interleaved(sides, b, run));
      else push(who === 'ours' ? o : t);
    },
  });
  return out.join('');
}

/**
 * The words of a run both sides changed two ways, as the shared text merges the two sides' edits
 * (`editsInto`: a replacement's words after the words it replaces; at one place, ours first):
 * every word either side added is there once, where it was added, and a base word is gone when
 * a side removed it, unless the other side added words inside what it removed (an edit of a
 * line the other side deleted keeps the whole line, line end included). So no word is there
 * twice that neither side wrote twice, and two sides that rewrote the same words keep both texts
 * side by side.
 */
function interleaved(sides: Sides<string>, base: string[], run: Run): string[] {
  const added = new Map<number, string[]>();
  // Per base word: 1 removed by ours, 2 by theirs, 4 by ours where theirs added inside, 8 the same
  // for theirs.
  const removed = new Map<number, number>();
  const mark = (hunks: Hunk[], units: string[], others: Hunk[], side: 1 | 2) => {
    for (const hunk of hunks) {
      const inside = others.some(
        (other) => other.bEnd > other.bStart && other.aEnd > hunk.aStart && other.aEnd < hunk.aEnd,
      );
      for (let k = hunk.aStart; k < hunk.aEnd; k += 1)
        removed.set(k, (removed.get(k) ?? 0) | (inside ? side * 4 : side));
      added.set(hunk.aEnd, [
        ...(added.get(hunk.aEnd) ?? []),
        ...units.slice(hunk.bStart, hunk.bEnd),
      ]);
    }
  };
  mark(run.ours, sides.ours, run.theirs, 1);
  mark(run.theirs, sides.theirs, run.ours, 2);
  // Gone: removed by a side whose removal stands, or by both.
  const gone = (how: number) => (how & 3) !== 0 || ((how & 4) !== 0 && (how & 8) !== 0);
  const out: string[] = [];
  for (let k = 0; k <= base.length; k += 1) {
    const at = run.start + k;
    for (const word of added.get(at) ?? []) out.push(word);
    if (k < base.length && !gone(removed.get(at) ?? 0)) out.push(base[k]!);
  }
  return out;
}

/**
 * The three-way merge of `ours` and `theirs`, both made from `base`, as edits of `theirs`: line
 * by line as git merges, and where both changed the same lines, word by word inside them. Each
 * edit is as small as `textEdits` makes it, so that the edits merge in turn with what other
 * devices change meanwhile.
 */
export function mergeEdits(base: string, ours: string, theirs: string): TextEdit[] {
  if (ours === theirs || ours === base) return [];
  if (theirs === base) return textEdits(theirs, ours);
  const edits: TextEdit[] = [];
  let at = 0; // position in theirs
  const edit = (from: string, to: string) => {
    for (const each of textEdits(from, to)) edits.push({ ...each, at: at + each.at });
  };
  walk(sidesOf(linesOf(base), linesOf(ours), linesOf(theirs)), sameUnits, {
    keep: (units) => {
      at += units.join('').length;
    },
    change: (b, o, t, who) => {
      const theirsText = t.join('');
      if (who === 'ours') edit(theirsText, o.join(''));
      else if (who === 'clash') edit(theirsText, mergeWords(b.join(''), o.join(''), theirsText));
      at += theirsText.length;
    },
  });
  return edits;
}

/** The three-way merge of `ours` and `theirs`, both made from `base` (see `mergeEdits`). */
export function merge3(base: string, ours: string, theirs: string): string {
  return applyEdits(theirs, mergeEdits(base, ours, theirs));
}
