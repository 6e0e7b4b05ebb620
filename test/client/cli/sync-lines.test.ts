import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices, stop } from './cli-devices.ts';

/**
 * The lines `sync` prints, in the order a person reads them: after a start that brings files
 * from the host (texts and a file kept as chunks), every `received` line comes before
 * `in sync`.
 */

const { setUp, confirmed } = cliDevices('sync-lines');

describe('the lines of sync', () => {
  it('prints in sync after the received lines of what the catch-up brought', async () => {
    const { config, folder, start } = await setUp();
    const names = ['a.md', 'b.md', 'notes/c.md', 'photo.bin'];
    mkdirSync(join(folder.one, 'notes'));
    for (const name of names.slice(0, 3)) {
      writeFileSync(join(folder.one, name), `${name}\n`);
    }
    writeFileSync(
      join(folder.one, 'photo.bin'),
      Buffer.concat([Buffer.from([0]), randomBytes(300_000)]),
    );
    const one = start('one');
    await eventually(() => one.out.stdout.includes('sent photo.bin (new)\n'), 'one sent', 30_000);
    await confirmed(config.one, 'one confirmed');
    await stop(one);

    const two = start('two');
    await eventually(() => two.out.stdout.includes('in sync\n'), 'two in sync', 30_000);
    await stop(two);
    const lines = two.out.stdout.split('\n');
    const inSync = lines.indexOf('in sync');
    const received = lines.flatMap((line, i) => (line.startsWith('received ') ? [i] : []));
    expect(received, two.out.stdout).toHaveLength(4);
    expect(Math.max(...received), two.out.stdout).toBeLessThan(inSync);
  }, 90_000);
});
