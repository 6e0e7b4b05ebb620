import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/wait.ts';
import { deviceFixture, type FolderDevice, putFile } from './devices.ts';
import { gitMerge } from './git-merge.ts';

/**
 * Notes edited on two devices at once, or on one while the other was away, through the real
 * host: every device ends with `git merge-file`'s result, and no conflict copy is made. The
 * first four cases are the ones a user met (lines doubled, words joined across lines, edits
 * lost) when a changed file was sent as one replacement from its first change to its last.
 */

const { devices } = deviceFixture('folder-merge', 2);

const ten = [
  'line 1 one',
  'line 2 two',
  'line 3 three',
  'line 4 four',
  'line 5 five',
  'line 6 six',
  'line 7 seven',
  'line 8 eight',
  'line 9 nine',
  'line 10 ten',
];

/** `lines` as a note, with the given lines (1-based) ending in ` <mark>`. */
function note(lines: string[], edits: Record<number, string> = {}): string {
  return `${lines.map((line, i) => (edits[i + 1] === undefined ? line : `${line} ${edits[i + 1]}`)).join('\n')}\n`;
}

function read(device: FolderDevice, path: string): string | undefined {
  try {
    return readFileSync(join(device.dir, path), 'utf8');
  } catch {
    return undefined;
  }
}

/** Waits until every device is joined and holds `path` with the same text; that text. */
async function agreed(all: FolderDevice[], path: string): Promise<string> {
  let last: string | undefined;
  return eventually(
    () => {
      for (const each of all) each.scan();
      const texts = all.map((each) => read(each, path));
      const same = all.every((each) => each.joined) && texts.every((t) => t === texts[0]);
      // The same text twice in a row: nothing is still on its way.
      const settled = same && texts[0] !== undefined && texts[0] === last;
      last = same ? texts[0] : undefined;
      return settled ? texts[0] : undefined;
    },
    `${path} alike on every device`,
    20_000,
  );
}

/** The names in a device's folder (dot files left out): no conflict copy may appear. */
function names(device: FolderDevice): string[] {
  return readdirSync(device.dir).filter((name) => !name.startsWith('.'));
}

/** Two started devices holding `content` at `path`, in step. */
async function inStep(path: string, content: string): Promise<FolderDevice[]> {
  const pair = await devices();
  for (const each of pair) await each.start();
  putFile(pair[0]!.dir, path, content);
  pair[0]!.notice(path);
  await eventually(() => {
    pair[1]!.scan();
    return read(pair[1]!, path) === content;
  }, `${path} on the second device`);
  await pair[0]!.flush();
  await pair[1]!.flush();
  return pair;
}

/** Both devices save their version of `path` at once: neither has seen the other's. */
function saveAtOnce(pair: FolderDevice[], path: string, versions: string[]): void {
  for (const [i, each] of pair.entries()) writeFileSync(join(each.dir, path), versions[i]!);
  for (const each of pair) each.notice(path);
}

async function expectGitsMerge(
  pair: FolderDevice[],
  path: string,
  base: string,
  ours: string,
  theirs: string,
) {
  const git = gitMerge(base, ours, theirs);
  expect(git.clean).toBe(true);
  const merged = await agreed(pair, path);
  expect(merged).toBe(git.text);
  for (const each of pair) expect(names(each)).toEqual([path]);
  return merged;
}

describe('folder sync: notes merge as git merges them', () => {
  it('two devices each changing two separate lines of a 10-line note at once', async () => {
    const base = note(ten);
    const pair = await inStep('note.md', base);
    try {
      const a = note(ten, { 2: 'A-EDIT', 8: 'A-EDIT' });
      const b = note(ten, { 5: 'B-EDIT', 10: 'B-EDIT' });
      saveAtOnce(pair, 'note.md', [a, b]);
      const merged = await expectGitsMerge(pair, 'note.md', base, a, b);
      expect(merged.split('\n')).toHaveLength(11);
    } finally {
      for (const each of pair) await each.stop();
    }
  }, 60_000);

  it('one device editing while offline (lines 1, 5, 6), the other online (lines 3, 9)', async () => {
    const base = note(ten);
    const [a, b] = await inStep('note.md', base);
    try {
      await a!.stop();
      const offline = note(ten, { 1: 'OFFLINE-A', 5: 'OFFLINE-A', 6: 'OFFLINE-A' });
      writeFileSync(join(a!.dir, 'note.md'), offline);
      const online = note(ten, { 3: 'ONLINE-B', 9: 'ONLINE-B' });
      writeFileSync(join(b!.dir, 'note.md'), online);
      b!.notice('note.md');
      await b!.flush();
      await a!.start();
      await expectGitsMerge([a!, b!], 'note.md', base, offline, online);
    } finally {
      await a!.stop();
      await b!.stop();
    }
  }, 60_000);

  it("a vault's Home.md (56 lines) saved on both devices at once, one edit each in two places", async () => {
    const home = homeNote();
    const base = note(home);
    const pair = await inStep('Home.md', base);
    try {
      const a = note(home, { 9: '(updated)', 39: '#review' });
      const b = note(home, { 21: '✓', 50: '— see inbox' });
      saveAtOnce(pair, 'Home.md', [a, b]);
      const merged = await expectGitsMerge(pair, 'Home.md', base, a, b);
      expect(merged.split('\n')).toHaveLength(57);
    } finally {
      for (const each of pair) await each.stop();
    }
  }, 60_000);

  it('a 60-line note with three edits on each device in separate paragraphs', async () => {
    const lines = paragraphs(60);
    const base = note(lines);
    const pair = await inStep('long.md', base);
    try {
      const a = note(lines, { 3: 'A1', 22: 'A2', 45: 'A3' });
      const b = note(lines, { 12: 'B1', 33: 'B2', 57: 'B3' });
      saveAtOnce(pair, 'long.md', [a, b]);
      const merged = await expectGitsMerge(pair, 'long.md', base, a, b);
      expect(merged.split('\n')).toHaveLength(61);
    } finally {
      for (const each of pair) await each.stop();
    }
  }, 60_000);

  it('the same typo fixed and the same line added on both devices at once, kept once as git keeps them', async () => {
    const base = note(ten);
    const pair = await inStep('note.md', base);
    try {
      const both = (line: string) => line.replace('line 4 four', 'line 4 FOUR');
      const added = (lines: string[]) => [
        ...lines.slice(0, 6),
        'a line both add',
        ...lines.slice(6),
      ];
      const a = note(added(ten.map(both)), { 2: 'A-EDIT' });
      const b = note(added(ten.map(both)), { 10: 'B-EDIT' });
      saveAtOnce(pair, 'note.md', [a, b]);
      const merged = await expectGitsMerge(pair, 'note.md', base, a, b);
      expect(merged.match(/FOUR/g)).toHaveLength(1);
      expect(merged.match(/a line both add/g)).toHaveLength(1);
    } finally {
      for (const each of pair) await each.stop();
    }
  }, 60_000);

  it("merges an edit saved here that was not read yet when another device's edit arrives, never a conflict copy", async () => {
    const base = note(ten);
    const [a, b] = await inStep('note.md', base);
    try {
      // Saved on A, and A's watcher has not said so yet...
      const here = note(ten, { 8: 'HERE' });
      writeFileSync(join(a!.dir, 'note.md'), here);
      // ...when B's edit arrives and is written on A.
      const there = note(ten, { 2: 'THERE' });
      writeFileSync(join(b!.dir, 'note.md'), there);
      b!.notice('note.md');
      const seen = a!.lines.length;
      await eventually(
        () => a!.lines.slice(seen).some((line) => line.includes('note.md')),
        "B's edit handled on A",
      );
      await expectGitsMerge([a!, b!], 'note.md', base, here, there);
      expect(a!.lines.join('\n')).not.toMatch(/conflict/);
    } finally {
      await a!.stop();
      await b!.stop();
    }
  }, 60_000);

  it('merges a text saved here while sync was killed in the middle of writing an edit from another device', async () => {
    const base = note(ten);
    const [a, b] = await inStep('note.md', base);
    try {
      a!.crashAtNextBatch();
      const there = note(ten, { 2: 'THERE' });
      writeFileSync(join(b!.dir, 'note.md'), there);
      b!.notice('note.md');
      await eventually(() => !a!.running, 'A killed after recording the batch');
      const here = note(ten, { 8: 'HERE' });
      writeFileSync(join(a!.dir, 'note.md'), here);
      await a!.start();
      await expectGitsMerge([a!, b!], 'note.md', base, here, there);
    } finally {
      await a!.stop();
      await b!.stop();
    }
  }, 60_000);

  it('an editor saving every few hundred ms on both devices ends as one save each would', async () => {
    const lines = paragraphs(40);
    const base = note(lines);
    const pair = await inStep('draft.md', base);
    try {
      // Each device types at the end of lines of its own, in every other paragraph, two lines
      // per save; its editor takes in what arrives from the other device before its next save
      // (as Obsidian does).
      const own = [
        [2, 22, 12, 32, 3, 23, 13, 33, 1, 21],
        [6, 26, 16, 36, 7, 27, 17, 37, 8, 28],
      ];
      const finals: Record<number, string>[] = [{}, {}];
      for (let step = 0; step < 5; step += 1) {
        pair.forEach((each, d) => {
          const current = read(each, 'draft.md')!.split('\n');
          for (const line of own[d]!.slice(step * 2, step * 2 + 2)) {
            const word = `w${d}${step}l${line}`;
            finals[d]![line] = word;
            current[current.findIndex((l) => l.startsWith(lines[line - 1]!))] += ` ${word}`;
          }
          writeFileSync(join(each.dir, 'draft.md'), current.join('\n'));
          each.notice('draft.md');
        });
        await new Promise((resolve) => setTimeout(resolve, 150 + step * 60));
      }
      const ours = note(lines, finals[0]);
      const theirs = note(lines, finals[1]);
      await expectGitsMerge(pair, 'draft.md', base, ours, theirs);
    } finally {
      for (const each of pair) await each.stop();
    }
  }, 60_000);
});

/** A note of paragraphs of four lines, each line unique. */
function paragraphs(count: number): string[] {
  return Array.from({ length: count }, (_, i) =>
    i % 5 === 4
      ? ''
      : `Paragraph ${Math.floor(i / 5) + 1}, sentence ${(i % 5) + 1}: some words here.`,
  );
}

/** A vault's home note as people write them: headings, links, lists, blank lines. */
function homeNote(): string[] {
  const lines = ['# Home', '', 'Welcome back. Start here.', ''];
  const sections = ['Projects', 'Areas', 'Reading', 'Journal', 'Inbox', 'Archive'];
  for (const section of sections) {
    lines.push(`## ${section}`, '');
    for (let i = 1; i <= 5; i += 1)
      lines.push(`- [[${section} ${i}]] notes on ${section.toLowerCase()} item ${i}`);
    lines.push('');
  }
  lines.push('---', 'Last review: Sunday');
  while (lines.length < 56) lines.push(`- extra link ${lines.length}`);
  return lines.slice(0, 56);
}
