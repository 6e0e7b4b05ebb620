import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `git merge-file`, the oracle of the text merge: the merge of `ours` and `theirs` over `base`,
 * and whether git merged it without a conflict (then its text is the one right answer).
 */
export function gitMerge(
  base: string,
  ours: string,
  theirs: string,
): { clean: boolean; text: string } {
  const dir = mkdtempSync(join(tmpdir(), 'git-merge-'));
  try {
    const files = ['ours', 'base', 'theirs'].map((name) => join(dir, name));
    writeFileSync(files[0]!, ours);
    writeFileSync(files[1]!, base);
    writeFileSync(files[2]!, theirs);
    const run = spawnSync('git', ['merge-file', '-p', ...files], { encoding: 'buffer' });
    if (run.error !== undefined) throw run.error;
    if (run.status === null || run.status < 0 || run.status > 127) {
      throw new Error(`git merge-file failed: ${run.stderr.toString()}`);
    }
    return { clean: run.status === 0, text: run.stdout.toString('utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Git's merge of every version over `base`, one after the other; clean only if every step was. */
export function gitMergeAll(base: string, versions: string[]): { clean: boolean; text: string } {
  let merged = { clean: true, text: versions[0]! };
  for (const version of versions.slice(1)) {
    const step = gitMerge(base, merged.text, version);
    merged = { clean: merged.clean && step.clean, text: step.text };
    if (!merged.clean) break;
  }
  return merged;
}

/** The lines of a text with their line ends, as the merge counts them. */
export function linesWithEnds(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}
