import fc from 'fast-check';

/**
 * Random notes and devices' edits of them, for the merge's tests against `git merge-file`:
 * notes of words (unicode included), blank and repeated lines, `\n` or `\r\n` line ends, with
 * or without a final one; each device edits numbered lines that no other device edits (blank
 * lines and rules, which repeat, are context only). Every word a device adds is unique to it.
 */

const words = ['note', 'todo', 'naïve', 'Straße', '日本語', '😀', 'x', '-', '#', '[link](a.md)'];

export interface Note {
  lines: string[];
  eol: '\n' | '\r\n';
  finalEol: boolean;
}

const note: fc.Arbitrary<Note> = fc
  .record({
    lines: fc.array(
      fc.oneof(
        {
          weight: 8,
          arbitrary: fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 6 }),
        },
        { weight: 1, arbitrary: fc.constant([] as string[]) },
        { weight: 1, arbitrary: fc.constant(['---']) },
      ),
      { minLength: 1, maxLength: 30, size: 'max' },
    ),
    eol: fc.constantFrom('\n' as const, '\r\n' as const),
    finalEol: fc.boolean(),
  })
  .map(({ lines, eol, finalEol }) => ({
    // Line numbers make most lines unique, as in a real note; blank lines and rules repeat.
    lines: lines.map((line, i) =>
      line.length === 0 || line[0] === '---' ? line.join(' ') : `${i} ${line.join(' ')}`,
    ),
    eol,
    finalEol,
  }));

function textOf(lines: string[], eol: string, finalEol: boolean): string {
  if (lines.length === 0) return '';
  return lines.join(eol) + (finalEol ? eol : '');
}

/** An edit of one line by one device; `word` is unique to the device and the edit. */
export interface LineEdit {
  kind: (typeof editKinds)[number];
  word: string;
}

const editKinds = ['append', 'middle', 'replace-first', 'add-line', 'delete-line'] as const;

/** A device's version: each of its lines edited as `edits` says. */
export function edited(base: Note, edits: Map<number, LineEdit>): string {
  return reedited(textOf(base.lines, base.eol, base.finalEol), base, edits);
}

/**
 * `text` (the note as a device holds it now, other devices' edits included) with this device's
 * `edits` made: each edited line is found by its text in the base (numbered lines are unique).
 */
export function reedited(text: string, base: Note, edits: Map<number, LineEdit>): string {
  const finalEol = text.endsWith(base.eol);
  const lines =
    text === '' ? [] : (finalEol ? text.slice(0, -base.eol.length) : text).split(base.eol);
  const out: string[] = [];
  for (const line of lines) {
    const i = base.lines.indexOf(line);
    const edit = i === -1 ? undefined : edits.get(i);
    if (edit === undefined) {
      out.push(line);
      continue;
    }
    const parts = line.split(' ');
    switch (edit.kind) {
      case 'append':
        out.push(`${line} ${edit.word}`);
        break;
      case 'middle':
        parts.splice(Math.max(1, Math.floor(parts.length / 2)), 0, edit.word);
        out.push(parts.join(' '));
        break;
      case 'replace-first':
        parts[0] = edit.word;
        out.push(parts.join(' '));
        break;
      case 'add-line':
        out.push(line, `${edit.word} new line`);
        break;
      case 'delete-line':
        break;
    }
  }
  return textOf(out, base.eol, finalEol);
}

/** A note and two or three devices' versions, each device editing lines no other edits. */
export interface Scenario {
  note: Note;
  /** Each device's edits by base line. */
  edits: Map<number, LineEdit>[];
  base: string;
  versions: string[];
  /** The lines that stay as they are. */
  untouched: string[];
  /** The words the devices add. */
  words: string[];
}

export const scenario: fc.Arbitrary<Scenario> = fc
  .record({
    base: note,
    devices: fc.integer({ min: 2, max: 3 }),
    // Runs of lines, each edited by one device (or none when the owner is past the last).
    plan: fc.array(
      fc.record({ owner: fc.nat(3), kind: fc.nat(4), length: fc.integer({ min: 1, max: 4 }) }),
      { minLength: 30, maxLength: 30 },
    ),
    // Whether a line no device edits ends each run: the devices' edits then stay apart, and
    // git mostly merges them cleanly; without, they often meet (neighbouring lines).
    apart: fc.boolean(),
  })
  .map(({ base, devices, plan, apart }) => {
    const edits = Array.from({ length: devices }, () => new Map<number, LineEdit>());
    let i = 0;
    for (const run of plan) {
      for (let k = 0; k < run.length && i < base.lines.length; k += 1, i += 1) {
        const last = k === run.length - 1;
        // Devices edit numbered lines; blank lines and rules, which repeat, are context only.
        if (run.owner >= devices || (apart && last) || !/^\d/.test(base.lines[i]!)) continue;
        const kind = editKinds[(run.kind + k) % editKinds.length]!;
        edits[run.owner]!.set(i, { kind, word: `D${run.owner}E${i}z` });
      }
    }
    return {
      note: base,
      edits,
      base: textOf(base.lines, base.eol, base.finalEol),
      versions: edits.map((each) => edited(base, each)),
      // The lines that stay as they are: edited by no device, or only followed by a new line.
      untouched: base.lines.filter((_, i) =>
        edits.every((each) => each.get(i) === undefined || each.get(i)?.kind === 'add-line'),
      ),
      words: edits.flatMap((each) =>
        [...each.values()].filter((e) => e.kind !== 'delete-line').map((e) => e.word),
      ),
    };
  });
