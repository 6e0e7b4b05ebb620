import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { gitMerge } from '../../folder/git-merge.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { agreed, type CliDevice, syncScope } from './sync-peers.ts';

/**
 * A first `sync` on a folder whose notes another device already syncs: a note copied from an
 * earlier version (a backup, another machine) and edited since merges with what the other
 * device made of that version, as `git merge-file` merges it from that version (its common
 * ancestor, found in the host's history); a note with little in common with the other's stays
 * beside it as a conflict copy. Two real `sync` processes and a real host.
 */

const scope = syncScope('first-merge@example.org');

const v1 = `${Array.from({ length: 10 }, (_, i) => `line ${i + 1} of the plan`).join('\n')}\n`;
/** `text` with line `n` (1-based) replaced by `by`. */
function withLine(text: string, n: number, by: string): string {
  const lines = text.split('\n');
  lines[n - 1] = by;
  return lines.join('\n');
}

describe('sync-host sync: a first sync merges a note copied from an earlier version', () => {
  const devices: { a?: CliDevice; b?: CliDevice } = {};
  let base = '';

  beforeAll(async () => {
    base = scope.tempDir();
    devices.a = await scope.device('laptop', join(base, 'config-a'));
    devices.b = await scope.device('desktop', join(base, 'config-b'));
  });

  async function stop(run: CliRun): Promise<void> {
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  }

  /**
   * The laptop syncs `plan.md` as v1, then as `v2`, and stops; the desktop's folder holds
   * `desktop` in its place before its first sync. Resolves with both folders once alike.
   */
  async function firstSyncAfter(v2: string, desktop: string) {
    const { key } = await scope.project(devices.a!);
    const dirA = join(base, `${key}-a`);
    const dirB = join(base, `${key}-b`);
    mkdirSync(dirA);
    mkdirSync(dirB);
    writeFileSync(join(dirA, 'plan.md'), v1);
    const a = await scope.sync(devices.a!, key, dirA);
    await eventually(() => a.out.stdout.includes('sent plan.md (new)'), 'v1 sent');
    writeFileSync(join(dirA, 'plan.md'), v2);
    await eventually(() => /sent plan\.md\n/.test(a.out.stdout), 'v2 sent');
    await stop(a);
    writeFileSync(join(dirB, 'plan.md'), desktop);
    const b = await scope.sync(devices.b!, key, dirB);
    await scope.sync(devices.a!, key, dirA);
    return { files: await agreed([dirA, dirB]), b };
  }

  it('merges an edited copy of an earlier version as git merges it from that version', async () => {
    const v2 = withLine(v1, 9, 'line 9 of the plan, changed on the laptop');
    const desktop = withLine(v1, 2, 'line 2 of the plan, changed on the desktop');
    const git = gitMerge(v1, desktop, v2);
    expect(git.clean).toBe(true);
    const { files, b } = await firstSyncAfter(v2, desktop);
    expect(files).toEqual({ 'plan.md': git.text });
    expect(b.out.stdout).toContain('sent plan.md (merged with the version on other devices)');
  }, 60_000);

  it('takes the newer text over an old copy with no edit of its own', async () => {
    const v2 = withLine(v1, 5, 'line 5 of the plan, changed on the laptop');
    const { files } = await firstSyncAfter(v2, v1);
    expect(files).toEqual({ 'plan.md': v2 });
  }, 60_000);

  it('keeps a note with little in common as a conflict copy', async () => {
    const v2 = withLine(v1, 5, 'line 5 of the plan, changed on the laptop');
    const desktop = 'a note of its own\nmade on the desktop\n';
    const { files } = await firstSyncAfter(v2, desktop);
    expect(Object.values(files).sort()).toEqual([desktop, v2].sort());
    expect(files['plan.md']).toBeDefined();
  }, 60_000);
});
