import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/wait.ts';
import { deviceFixture, type FolderDevice } from './devices.ts';
import { gitMergeAll } from './git-merge.ts';
import { type LineEdit, type Scenario as Run, reedited, scenario } from './note-edits.ts';

/**
 * The folder sync's text merge under random use, on the real host, with `git merge-file` as the
 * oracle: a random note in step on two or three devices, each device editing lines of its own,
 * all online at once, one of them offline while it edits, or each saving in two steps while the
 * others' edits arrive (its editor taking them in before the next save). Once all are back and
 * quiet, every device holds exactly git's merge of the devices' versions, byte for byte.
 */

const { devices } = deviceFixture('merge-model', 3);
const runs = Number(process.env.FOLDER_MERGE_RUNS ?? 12);

type Mode = 'online' | 'offline' | 'interleaved';

function read(device: FolderDevice): string | undefined {
  try {
    return readFileSync(join(device.dir, 'note.md'), 'utf8');
  } catch {
    return undefined;
  }
}

async function agreed(all: FolderDevice[]): Promise<string> {
  let last: string | undefined;
  return eventually(
    () => {
      for (const each of all) each.scan();
      const texts = all.map(read);
      const same = all.every((each) => each.joined) && texts.every((t) => t === texts[0]);
      const settled = same && texts[0] !== undefined && texts[0] === last;
      last = same ? texts[0] : undefined;
      return settled ? texts[0] : undefined;
    },
    'note.md alike on every device',
    30_000,
  );
}

/** A device's save: its `edits` made to the note as it holds it now. */
function save(device: FolderDevice, run: Run, edits: Map<number, LineEdit>): void {
  writeFileSync(join(device.dir, 'note.md'), reedited(read(device)!, run.note, edits));
  device.notice('note.md');
}

/** The first or second half of a device's edits, by line. */
function half(edits: Map<number, LineEdit>, second: boolean): Map<number, LineEdit> {
  const lines = [...edits.keys()].sort((x, y) => x - y);
  const cut = Math.ceil(lines.length / 2);
  return new Map((second ? lines.slice(cut) : lines.slice(0, cut)).map((i) => [i, edits.get(i)!]));
}

async function play(run: Run, mode: Mode, away: number, pauseMs: number): Promise<void> {
  const all = (await devices()).slice(0, run.versions.length);
  try {
    for (const each of all) await each.start();
    writeFileSync(join(all[0]!.dir, 'note.md'), run.base);
    all[0]!.notice('note.md');
    expect(await agreed(all)).toBe(run.base);
    const offline = all[away % all.length]!;
    if (mode === 'offline') await offline.stop();
    if (mode === 'interleaved') {
      for (const [d, each] of all.entries()) save(each, run, half(run.edits[d]!, false));
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      for (const [d, each] of all.entries()) save(each, run, half(run.edits[d]!, true));
    } else {
      for (const [d, each] of all.entries()) save(each, run, run.edits[d]!);
    }
    if (mode === 'offline') {
      for (const each of all) await each.flush();
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      await offline.start();
    }
    const git = gitMergeAll(run.base, run.versions);
    expect(await agreed(all)).toBe(git.text);
  } finally {
    for (const each of all) await each.stop();
  }
}

describe('folder sync: random notes merged as git merges them, over the real host', () => {
  it('ends with git merge-file’s result on every device, online, offline and saving in steps', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenario.filter(({ base, versions }) => gitMergeAll(base, versions).clean),
        fc.constantFrom<Mode>('online', 'offline', 'interleaved'),
        fc.nat(2),
        fc.integer({ min: 0, max: 300 }),
        play,
      ),
      { numRuns: runs, endOnFailure: true },
    );
  }, 600_000);
});
