import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices } from './cli-devices.ts';

/**
 * `history` and `restore` on a device whose `sync` of the project runs (as a service would run
 * it): they go through its control socket and its connection, never refuse with
 * `sync_running`; a restored file is written by that sync in its folder and reaches the other
 * device; the sync runs on.
 */

const { cli, setUp, confirmed } = cliDevices('history-running');

const binary = () => Buffer.concat([Buffer.from([0]), randomBytes(5_000)]);

function sameBytes(file: string, bytes: Buffer): boolean {
  try {
    return readFileSync(file).equals(bytes);
  } catch {
    return false;
  }
}

function textAt(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

describe('history and restore while sync runs on this device', () => {
  it('answers through the running sync, which writes the restored files', async () => {
    const { th, config, folder, start } = await setUp();
    /** Waits until device one's `sync` printed `line` and the host confirmed all it sent. */
    const sent = async (sync: CliRun, line: string) => {
      await eventually(() => sync.out.stdout.includes(`${line}\n`), line, 30_000);
      await confirmed(config.one, `${line}: confirmed`);
    };
    writeFileSync(join(folder.one, 'plan.md'), 'first version\n');
    writeFileSync(join(folder.one, 'gone.md'), 'deleted later\n');
    const photo = [binary(), binary()];
    writeFileSync(join(folder.one, 'photo.bin'), photo[0]!);
    const one = start('one');
    await sent(one, 'sent gone.md (new)');
    await sent(one, 'sent photo.bin (new)');
    const between = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    writeFileSync(join(folder.one, 'plan.md'), 'second version\n');
    await sent(one, 'sent plan.md');
    writeFileSync(join(folder.one, 'photo.bin'), photo[1]!);
    await sent(one, 'sent photo.bin');
    unlinkSync(join(folder.one, 'gone.md'));
    await sent(one, 'sent gone.md (deleted)');
    const two = start('two');
    await eventually(
      () => textAt(join(folder.two, 'plan.md')) === 'second version\n',
      'plan.md at two',
      30_000,
    );

    const run = (args: string[]) => cli([...args, '--relay', th.relayUrl], config.one);
    const listed = await run(['history', 'files']);
    expect(listed.code, listed.stderr).toBe(0);
    const changes = listed.stdout
      .trim()
      .split('\n')
      .map((line) => line.split('  ').slice(2).join('  '));
    expect(changes).toEqual(
      expect.arrayContaining([
        'created  plan.md',
        'changed  plan.md',
        'created  gone.md',
        'deleted  gone.md',
      ]),
    );
    const earlier = await run(['restore', 'files', 'plan.md', '--at', between]);
    expect(earlier.code, earlier.stderr).toBe(0);
    expect(earlier.stdout).toBe(`restored plan.md as of ${between}\n`);
    const back = await run(['restore', 'files', 'gone.md']);
    expect(back.code, back.stderr).toBe(0);
    const image = await run(['restore', 'files', 'photo.bin', '--at', between]);
    expect(image.code, image.stderr).toBe(0);
    for (const dir of [folder.one, folder.two]) {
      await eventually(
        () =>
          textAt(join(dir, 'plan.md')) === 'first version\n' &&
          textAt(join(dir, 'gone.md')) === 'deleted later\n' &&
          sameBytes(join(dir, 'photo.bin'), photo[0]!),
        `both restored in ${dir}`,
        30_000,
      );
    }
    const again = await run(['restore', 'files', 'gone.md']);
    expect(again.stdout).toBe('gone.md is already as it was\n');
    // The whole project as it was then, through the running sync: what differs comes back.
    writeFileSync(join(folder.one, 'plan.md'), 'third version\n');
    await eventually(
      () => textAt(join(folder.two, 'plan.md')) === 'third version\n',
      'the third version at two',
      30_000,
    );
    await sent(one, 'sent plan.md'); // and the host confirmed it
    const all = await run(['restore', 'files', '--all', '--at', between]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain(`restored plan.md as of ${between}\n`);
    expect(all.stdout).toContain('photo.bin is already as it was\n');
    await eventually(
      () => textAt(join(folder.two, 'plan.md')) === 'first version\n',
      'plan.md back at two',
      30_000,
    );
    expect(one.child.exitCode).toBeNull();
    for (const sync of [one, two]) {
      sync.child.kill('SIGTERM');
      expect(await sync.exited).toBe(0);
    }
    expect(one.out.stderr + listed.stderr + earlier.stderr).not.toContain('sync_running');
  }, 120_000);
});
