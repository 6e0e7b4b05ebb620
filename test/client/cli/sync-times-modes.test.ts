import { randomBytes } from 'node:crypto';
import { chmodSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices, stop } from './cli-devices.ts';

/**
 * Each file's modification time (to the millisecond) and permission bits, compared with `stat`
 * on two devices with real `sync` processes and a real host: after a handoff through the host
 * alone, after a change of mode or time alone, after a conflict of a binary file (each version
 * keeps its own), after a `restore`; and with `--no-perms`, modes neither sent nor set.
 */

const { cli, setUp: devices } = cliDevices('sync-times-modes');

async function setUp(syncArgs: string[] = []) {
  const { th, config, folder, start } = await devices({ syncArgs });
  /** Waits until `sync` printed `line` and the host confirmed all device `which` sent. */
  const sent = async (which: 'one' | 'two', sync: CliRun, line: string) => {
    await eventually(() => sync.out.stdout.includes(`${line}\n`), line, 30_000);
    await eventually(
      async () => {
        const status = await cli(['status', 'files', '--json'], config[which]);
        if (status.code !== 0) return false;
        const fields = JSON.parse(status.stdout) as {
          inSync: boolean;
          waitingUp: { files: number };
        };
        return fields.inSync && fields.waitingUp.files === 0;
      },
      `${line}: confirmed`,
      30_000,
    );
  };
  const run = (which: 'one' | 'two', args: string[]) =>
    cli([...args, '--relay', th.relayUrl], config[which]);
  return { folder, start, sent, run };
}

/** What `stat` shows of a file that must be the same everywhere: mtime in ms, mode bits. */
function metaOf(file: string): { mtime: number; mode: string } {
  const stats = statSync(file);
  return { mtime: Math.floor(stats.mtimeMs), mode: (stats.mode & 0o777).toString(8) };
}

/** `metaOf` as one string, or undefined when the file is not there (yet). */
function shown(file: string): string | undefined {
  try {
    return JSON.stringify(metaOf(file));
  } catch {
    return undefined;
  }
}

/** Sets a file's time (a date in the past, with milliseconds) and mode. */
function age(file: string, iso: string, mode: number): void {
  const seconds = Date.parse(iso) / 1000;
  utimesSync(file, seconds, seconds);
  chmodSync(file, mode);
}

const binary = (size: number) => Buffer.concat([Buffer.from([0]), randomBytes(size - 1)]);

/** Whether the files at `name` in both folders have the same bytes, time and mode. */
function same(folder: { one: string; two: string }, name: string): boolean {
  try {
    const [a, b] = [join(folder.one, name), join(folder.two, name)];
    if (!readFileSync(a).equals(readFileSync(b))) return false;
    return JSON.stringify(metaOf(a)) === JSON.stringify(metaOf(b));
  } catch {
    return false;
  }
}

describe('sync keeps times and modes', () => {
  it('gives a device that comes later, through the host alone, each file with its time and mode; a chmod or a touch alone syncs', async () => {
    const { folder, start, sent } = await setUp();
    writeFileSync(join(folder.one, 'Home.md'), '# Home\n');
    age(join(folder.one, 'Home.md'), '2026-08-20T10:11:12.345Z', 0o664);
    writeFileSync(join(folder.one, 'run.sh'), '#!/bin/sh\necho hi\n');
    age(join(folder.one, 'run.sh'), '2026-07-01T08:00:00.007Z', 0o755);
    writeFileSync(join(folder.one, 'scan.pdf'), binary(300_000));
    age(join(folder.one, 'scan.pdf'), '2025-12-31T23:59:59.999Z', 0o600);
    const expected = ['Home.md', 'run.sh', 'scan.pdf'].map((name) => [
      name,
      metaOf(join(folder.one, name)),
    ]);
    let one = start('one');
    for (const name of ['Home.md', 'run.sh', 'scan.pdf'])
      await sent('one', one, `sent ${name} (new)`);
    await stop(one);

    const two = start('two');
    await eventually(
      () => expected.every(([name]) => same(folder, name as string)),
      'all three',
      30_000,
    );
    expect(
      ['Home.md', 'run.sh', 'scan.pdf'].map((name) => [name, metaOf(join(folder.two, name))]),
    ).toEqual(expected);
    // The other way, both running: the mode alone of a text and of a binary file, and a time alone.
    one = start('one');
    await eventually(() => one.out.stdout.includes('in sync\n'), 'one in sync', 30_000);
    chmodSync(join(folder.two, 'Home.md'), 0o755);
    chmodSync(join(folder.two, 'scan.pdf'), 0o640);
    const touched = Date.parse('2026-09-01T00:00:00.250Z') / 1000;
    utimesSync(join(folder.two, 'run.sh'), touched, touched);
    const touchedMs = metaOf(join(folder.two, 'run.sh')).mtime;
    await eventually(
      () =>
        metaOf(join(folder.one, 'Home.md')).mode === '755' &&
        metaOf(join(folder.one, 'scan.pdf')).mode === '640' &&
        metaOf(join(folder.one, 'run.sh')).mtime === touchedMs,
      'the modes and the time at one',
      30_000,
    );
    for (const name of ['Home.md', 'run.sh', 'scan.pdf'])
      expect(same(folder, name), name).toBe(true);
    expect(two.out.stdout).toContain('sent Home.md (mode 755)\n');
    expect(one.out.stdout).toContain('received Home.md (mode 755)\n');
    await stop(one);
    await stop(two);
  }, 120_000);

  it('keeps, after a conflict of a binary file, the time and mode of each version: the newer at the name, the other in the copy', async () => {
    const { folder, start, sent } = await setUp();
    writeFileSync(join(folder.one, 'photo.bin'), binary(5_000));
    let one = start('one');
    await sent('one', one, 'sent photo.bin (new)');
    await stop(one);
    let two = start('two');
    await eventually(() => same(folder, 'photo.bin'), 'photo.bin at two', 30_000);
    await stop(two);
    // Changed apart: the older edit on one (mode 600), the newer on two (mode 755).
    const older = binary(5_000);
    const newer = binary(5_000);
    writeFileSync(join(folder.one, 'photo.bin'), older);
    age(join(folder.one, 'photo.bin'), '2026-10-01T09:00:00.111Z', 0o600);
    writeFileSync(join(folder.two, 'photo.bin'), newer);
    age(join(folder.two, 'photo.bin'), '2026-10-02T09:00:00.222Z', 0o755);
    const olderMeta = metaOf(join(folder.one, 'photo.bin'));
    const newerMeta = metaOf(join(folder.two, 'photo.bin'));
    expect([olderMeta.mode, newerMeta.mode]).toEqual(['600', '755']);
    one = start('one');
    await sent('one', one, 'sent photo.bin');
    two = start('two');
    const copy = 'photo.sync-conflict-20261001-090000-';
    const copyAt = (dir: string) => readdirSync(dir).find((name) => name.startsWith(copy));
    await eventually(
      () => copyAt(folder.one) !== undefined && copyAt(folder.two) !== undefined,
      'the conflict copy on both',
      30_000,
    );
    const name = copyAt(folder.one)!;
    await eventually(
      () => same(folder, 'photo.bin') && same(folder, name),
      'the same two files on both',
      30_000,
    );
    expect(readFileSync(join(folder.one, 'photo.bin')).equals(newer)).toBe(true);
    expect(metaOf(join(folder.one, 'photo.bin'))).toEqual(newerMeta);
    expect(readFileSync(join(folder.one, name)).equals(older)).toBe(true);
    expect(metaOf(join(folder.one, name))).toEqual(olderMeta);
    await stop(one);
    await stop(two);
  }, 120_000);

  it('brings a file back with restore with the time and mode it had then', async () => {
    const { folder, start, sent, run } = await setUp();
    writeFileSync(join(folder.one, 'tool.sh'), '#!/bin/sh\necho one\n');
    age(join(folder.one, 'tool.sh'), '2026-06-06T06:06:06.606Z', 0o750);
    writeFileSync(join(folder.one, 'tool.bin'), binary(5_000));
    age(join(folder.one, 'tool.bin'), '2026-05-05T05:05:05.505Z', 0o700);
    const then = {
      sh: metaOf(join(folder.one, 'tool.sh')),
      bin: metaOf(join(folder.one, 'tool.bin')),
    };
    let one = start('one');
    await sent('one', one, 'sent tool.sh (new)');
    await sent('one', one, 'sent tool.bin (new)');
    await stop(one);
    const between = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 50));
    writeFileSync(join(folder.one, 'tool.sh'), '#!/bin/sh\necho two\n');
    chmodSync(join(folder.one, 'tool.sh'), 0o644);
    writeFileSync(join(folder.one, 'tool.bin'), binary(5_000));
    chmodSync(join(folder.one, 'tool.bin'), 0o644);
    one = start('one');
    await sent('one', one, 'sent tool.sh');
    await sent('one', one, 'sent tool.bin');
    await stop(one);
    const two = start('two');
    await eventually(
      () => same(folder, 'tool.sh') && same(folder, 'tool.bin'),
      'tool.bin at two',
      30_000,
    );

    for (const name of ['tool.sh', 'tool.bin']) {
      const restored = await run('one', ['restore', 'files', name, '--at', between]);
      expect(restored.code, restored.stderr).toBe(0);
    }
    await eventually(
      () =>
        readFileSync(join(folder.two, 'tool.sh'), 'utf8') === '#!/bin/sh\necho one\n' &&
        shown(join(folder.two, 'tool.sh')) === JSON.stringify(then.sh) &&
        shown(join(folder.two, 'tool.bin')) === JSON.stringify(then.bin),
      'both back at two with their time and mode',
      30_000,
    );
    one = start('one');
    await eventually(
      () => same(folder, 'tool.sh') && same(folder, 'tool.bin'),
      'both back at one',
      30_000,
    );
    expect(metaOf(join(folder.one, 'tool.sh'))).toEqual(then.sh);
    await stop(one);
    await stop(two);
  }, 120_000);

  it('with --no-perms, sends no mode and sets none: the time is kept all the same', async () => {
    const { folder, start, sent } = await setUp(['--no-perms']);
    writeFileSync(join(folder.one, 'run.sh'), '#!/bin/sh\n');
    age(join(folder.one, 'run.sh'), '2026-07-01T08:00:00.007Z', 0o755);
    const one = start('one');
    await sent('one', one, 'sent run.sh (new)');
    const two = start('two');
    await eventually(
      () => {
        try {
          return (
            metaOf(join(folder.two, 'run.sh')).mtime === metaOf(join(folder.one, 'run.sh')).mtime
          );
        } catch {
          return false;
        }
      },
      'run.sh at two with its time',
      30_000,
    );
    expect(statSync(join(folder.two, 'run.sh')).mode & 0o111).toBe(0);
    await stop(one);
    await stop(two);
  }, 120_000);
});
