import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices, stop } from './cli-devices.ts';

/**
 * `history` of a renamed file, with a real `sync` process and a real host: one line, `renamed
 * <old> → <new>`, listed for the whole folder and for either path; the new path is not shown as
 * created, nor the old one as deleted.
 */

const { cli, setUp, confirmed } = cliDevices('history-rename');

/** The change and name columns of `history`'s lines. */
function changes(stdout: string): string[] {
  return stdout
    .trim()
    .split('\n')
    .map((line) => line.split('  ').slice(2).join('  '));
}

describe('history of a renamed file', () => {
  it('says where the file went, for the old path and for the new one', async () => {
    const { th, config, folder, start } = await setUp();
    writeFileSync(join(folder.one, 'old.md'), 'a note that moves\n');
    let one = start('one');
    await eventually(() => one.out.stdout.includes('sent old.md (new)\n'), 'sent', 30_000);
    await confirmed(config.one);
    await stop(one);
    mkdirSync(join(folder.one, 'notes'));
    renameSync(join(folder.one, 'old.md'), join(folder.one, 'notes/new.md'));
    one = start('one');
    await eventually(
      () => one.out.stdout.includes('sent old.md → notes/new.md (renamed)\n'),
      'the rename sent',
      30_000,
    );
    await confirmed(config.one);
    await stop(one);

    const history = (args: string[]) =>
      cli(['history', 'files', ...args, '--relay', th.relayUrl], config.two);
    const all = await history([]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stderr).toBe('');
    expect(changes(all.stdout)).toEqual(['created  old.md', 'renamed  old.md → notes/new.md']);
    expect(changes((await history(['old.md'])).stdout)).toEqual([
      'created  old.md',
      'renamed  old.md → notes/new.md',
    ]);
    expect(changes((await history(['notes/new.md'])).stdout)).toEqual([
      'renamed  old.md → notes/new.md',
    ]);
  }, 90_000);
});
