/**
 * `npm run bench:merge`: the folder sync's text merge.
 *
 * 1. CPU per save: a 1 MiB note (about 17,000 lines of markdown) with one changed line, and with
 *    100 changed lines spread through it, turned into edits of the shared text (the diff and the
 *    Yjs edits both), in this process: the line diff of jsdiff (what `sync` uses), of
 *    diff-match-patch and of fast-diff (each over lines mapped to characters) in the same
 *    region-by-region pipeline, against the single replacement `sync` sent before.
 *    And the three-way merge in text of a save read after 100 changes of another device reached
 *    the document (100 changes of its own elsewhere), with its edits of the shared text.
 * 2. Merge quality on notes: random notes edited by two or three devices in lines of their own
 *    (the tests' generator), merged in the shared text with each line diff: how many of
 *    `git merge-file`'s clean merges each gives byte for byte.
 * 3. Save to the other device: two devices on a real host in this process (loopback), device A
 *    saves the note; the time until device B's file holds it, region by region against the
 *    single replacement.
 *
 * Rounds alternate between the ways compared; medians.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import DiffMatchPatch from 'diff-match-patch';
import fc from 'fast-check';
import fastDiff from 'fast-diff';
import * as Y from 'yjs';
import { editsInto, editText, type ListDiff, mergeEdits } from '../client/folder/text-merge.ts';
import { FolderDevice } from '../test/folder/devices.ts';
import { gitMergeAll } from '../test/folder/git-merge.ts';
import { scenario } from '../test/folder/note-edits.ts';
import { registerProject, startTestHost } from '../test/helpers/host.ts';
import { replaceText } from './single-replacement.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
const scenarios = Number(process.env.BENCH_SCENARIOS ?? 300);

type Ops = [number, string][];

/** A line diff over lines mapped to one character each, as diff-match-patch's line mode does. */
function overChars(diff: (a: string, b: string) => Ops): ListDiff {
  return (a, b) => {
    const codes = new Map<string, string>();
    const encode = (units: string[]) =>
      units
        .map((unit) => {
          let code = codes.get(unit);
          if (code === undefined) {
            if (codes.size >= 65_000) throw new Error('too many distinct lines');
            code = String.fromCharCode(codes.size + 1);
            codes.set(unit, code);
          }
          return code;
        })
        .join('');
    const changes: { added?: boolean; removed?: boolean; value: string[] }[] = [];
    let i = 0;
    let j = 0;
    for (const [op, text] of diff(encode(a), encode(b))) {
      const count = text.length;
      if (op === 0) {
        changes.push({ value: a.slice(i, i + count) });
        i += count;
        j += count;
      } else if (op === -1) {
        changes.push({ removed: true, value: a.slice(i, i + count) });
        i += count;
      } else {
        changes.push({ added: true, value: b.slice(j, j + count) });
        j += count;
      }
    }
    return changes;
  };
}

const dmp = new DiffMatchPatch();
dmp.Diff_Timeout = 0; // the exact diff, never a quicker rough one

const ways: Record<string, (text: Y.Text, content: string) => void> = {
  'jsdiff (sync)': (text, content) => editText(text, content),
  'diff-match-patch': (text, content) =>
    editText(
      text,
      content,
      overChars((a, b) => dmp.diff_main(a, b, false) as Ops),
    ),
  'fast-diff': (text, content) =>
    editText(
      text,
      content,
      overChars((a, b) => fastDiff(a, b)),
    ),
  'single replacement (before)': replaceText,
};

function record(times: Record<string, number[]>, name: string, value: number): void {
  const list = times[name];
  if (list === undefined) times[name] = [value];
  else list.push(value);
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** A note of about 1 MiB: paragraphs of lines that differ, as in a large journal. */
function bigNote(): string[] {
  const words = ['note', 'idea', 'meeting', 'draft', 'review', 'later', 'plan', 'done'];
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < 1_048_576; i += 1) {
    const line =
      i % 6 === 5
        ? ''
        : `${i % 60 === 0 ? '## ' : '- '}${words[i % 8]} ${words[(i * 7) % 8]} item ${i}: ${'text '.repeat(6)}`;
    lines.push(line);
    bytes += line.length + 1;
  }
  return lines;
}

/** The note with `count` lines changed, spread evenly (`shift` lines down from the first). */
function changed(lines: string[], count: number, mark: string, shift = 0): string {
  const step = Math.floor(lines.length / (count + 1));
  return lines
    .map((line, i) => {
      const k = i - shift;
      return k > 0 && k % step === 0 && k / step <= count ? `${line} ${mark}` : line;
    })
    .join('\n');
}

function cpuPerSave(base: string, version: string): Record<string, number> {
  const times: Record<string, number[]> = {};
  // Two rounds first that are not counted: the code compiled and the heap grown for every way.
  for (let round = -2; round < rounds; round += 1) {
    for (const [name, way] of Object.entries(ways)) {
      const doc = new Y.Doc();
      doc.getText('t').insert(0, base);
      const started = process.cpuUsage();
      doc.transact(() => way(doc.getText('t'), version));
      const used = process.cpuUsage(started);
      if (doc.getText('t').toString() !== version) throw new Error(`${name} gave another text`);
      if (round >= 0) record(times, name, (used.user + used.system) / 1000);
    }
  }
  return Object.fromEntries(Object.entries(times).map(([name, t]) => [name, median(t)]));
}

/**
 * A file saved here from the base while 100 changes of another device reached the document
 * (100 of its own elsewhere): the three-way merge and the edits of the document, as `sync` makes
 * them when the save is read after the other device's changes.
 */
function threeWay(base: string, lines: string[]): number {
  const ours = changed(lines, 100, 'HERE');
  const theirs = changed(lines, 100, 'THERE', 100);
  const times: number[] = [];
  for (let round = -2; round < rounds; round += 1) {
    const doc = new Y.Doc();
    doc.getText('t').insert(0, theirs);
    const started = process.cpuUsage();
    const current = doc.getText('t').toString();
    doc.transact(() => editsInto(doc.getText('t'), mergeEdits(base, ours, current)));
    const used = process.cpuUsage(started);
    if (round >= 0) times.push((used.user + used.system) / 1000);
  }
  return median(times);
}

/** How many of git's clean merges each way gives exactly, merging in the shared text. */
function quality(): Record<string, string> {
  const runs = fc.sample(scenario, { numRuns: scenarios, seed: 42 });
  const clean = runs.filter((run) => gitMergeAll(run.base, run.versions).clean);
  const result: Record<string, string> = {};
  for (const [name, way] of Object.entries(ways)) {
    let same = 0;
    for (const run of clean) {
      const git = gitMergeAll(run.base, run.versions).text;
      const start = new Y.Doc();
      start.getText('t').insert(0, run.base);
      const docs = run.versions.map((version) => {
        const doc = new Y.Doc();
        Y.applyUpdate(doc, Y.encodeStateAsUpdate(start));
        doc.transact(() => way(doc.getText('t'), version));
        return doc;
      });
      for (const doc of docs)
        for (const other of docs) Y.applyUpdate(doc, Y.encodeStateAsUpdate(other));
      if (docs[0]!.getText('t').toString() === git) same += 1;
    }
    result[name] = `${same} of ${clean.length}`;
  }
  return result;
}

/** From A's save to B's file holding it, for each version, region by region and before. */
async function saveToOther(base: string, versions: Record<string, string>) {
  const th = await startTestHost({ ui: false });
  const a = await th.signIn('bench@example.org', 'bench-a');
  const b = await th.signIn('bench@example.org', 'bench-b');
  const root = mkdtempSync(join(tmpdir(), 'bench-merge-'));
  const times: Record<string, number[]> = {};
  try {
    let project = 0;
    for (let round = 0; round < rounds; round += 1) {
      for (const [how, edit] of [
        ['region by region', editText],
        ['single replacement', replaceText],
      ] as const) {
        project += 1;
        const { roomId } = await registerProject(th.base, a.deviceToken, `merge-${project}`);
        const pair = [a, b].map(
          (credential, i) =>
            new FolderDevice(
              th,
              roomId,
              credential,
              join(root, `p${project}-${i}`),
              join(root, `p${project}-${i}.log`),
              { editText: edit },
            ),
        );
        try {
          for (const each of pair) await each.start();
          writeFileSync(join(pair[0]!.dir, 'note.md'), base);
          pair[0]!.notice('note.md');
          await holds(pair[1]!, base);
          for (const [name, version] of Object.entries(versions)) {
            const started = performance.now();
            writeFileSync(join(pair[0]!.dir, 'note.md'), version);
            pair[0]!.notice('note.md');
            await holds(pair[1]!, version);
            record(times, `${name}, ${how}`, performance.now() - started);
            // Back to the base for the next version.
            writeFileSync(join(pair[0]!.dir, 'note.md'), base);
            pair[0]!.notice('note.md');
            await holds(pair[1]!, base);
          }
        } finally {
          for (const each of pair) await each.stop();
        }
      }
    }
  } finally {
    await th.close();
    rmSync(root, { recursive: true, force: true });
  }
  return Object.fromEntries(Object.entries(times).map(([name, t]) => [name, median(t)]));
}

async function holds(device: FolderDevice, text: string): Promise<void> {
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      if (readFileSync(join(device.dir, 'note.md'), 'utf8') === text) return;
    } catch {
      // not there yet
    }
    if (Date.now() > until) throw new Error('the other device never held the save');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

const lines = bigNote();
const base = lines.join('\n');
const versions = {
  'one line': changed(lines, 1, 'EDIT'),
  '100 lines': changed(lines, 100, 'EDIT'),
};
console.log(
  `note: ${(base.length / 1_048_576).toFixed(2)} MiB, ${lines.length} lines; ${rounds} rounds, medians`,
);
for (const [name, version] of Object.entries(versions)) {
  console.log(`\nCPU per save, ${name} changed (ms):`);
  const cpu = cpuPerSave(base, version);
  const reference = cpu['single replacement (before)']!;
  for (const [way, ms] of Object.entries(cpu)) {
    console.log(
      `  ${way.padEnd(30)} ${ms.toFixed(2).padStart(8)}  (${(ms / reference).toFixed(2)}x the single replacement)`,
    );
  }
}
console.log(
  '\nCPU of a three-way merge in text, 100 lines changed on each side, then its edits (ms):',
);
console.log(
  `  mergeEdits + the edits of the Y.Text ${threeWay(base, lines).toFixed(2).padStart(8)}`,
);
console.log(`\ngit merge-file's clean merges given exactly (${scenarios} random notes):`);
for (const [way, score] of Object.entries(quality())) console.log(`  ${way.padEnd(30)} ${score}`);
console.log('\nfrom a save on A to B holding the file, through the host (ms):');
const e2e = await saveToOther(base, versions);
for (const [name, ms] of Object.entries(e2e))
  console.log(`  ${name.padEnd(40)} ${ms.toFixed(1).padStart(8)}`);
