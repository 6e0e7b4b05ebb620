import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { progressDelayVariable } from '../../../client/cli/sync-progress.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { overwriteStoredChunk, storedChunks } from '../../helpers/stored-chunks.ts';
import { spawnInTerminal } from '../../helpers/terminal.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices } from './cli-devices.ts';

/**
 * `sync-host sync` processes with files that are not text: a conflict of a binary file listed by
 * `status --json`, a full store leaving the file waiting (and `status` saying so), a chunk
 * damaged on the host put back by the process that has the file, and a 200 MiB file through the
 * host with each process's memory sampled from /proc.
 */

const { cli, setUp: devices } = cliDevices('blobs-cli');

/** A host, a project and two signed-in devices with their own folders. */
async function setUp(relay: string[] = []) {
  const setup = await devices({ relay });
  const { config } = setup;
  /** What `status --json` says (a sync that does not answer yet: nothing waits, no conflict). */
  const status = async (which: 'one' | 'two') => {
    const run = await cli(['status', 'files', '--json'], config[which]);
    return (
      run.code === 0
        ? JSON.parse(run.stdout)
        : { waitingUp: { files: -1, bytes: 0 }, conflicts: [], storeFull: false }
    ) as { waitingUp: { files: number; bytes: number }; conflicts: string[]; storeFull: boolean };
  };
  return { ...setup, status };
}

function sameBytes(file: string, expected: Buffer): boolean {
  return existsSync(file) && readFileSync(file).equals(expected);
}

async function stop(run: CliRun): Promise<void> {
  run.child.kill('SIGTERM');
  expect(await run.exited).toBe(0);
}

describe('sync-host sync with files kept as chunks', () => {
  it('lists the conflict copy of a binary file changed on two devices apart in status --json', async () => {
    const { folder, start, status, deviceOne } = await setUp();
    const first = Buffer.concat([Buffer.from([0]), randomBytes(5000)]);
    writeFileSync(join(folder.one, 'photo.jpg'), first);
    let one = start('one');
    let two = start('two');
    await eventually(() => sameBytes(join(folder.two, 'photo.jpg'), first), 'photo at two', 30_000);
    await stop(two);
    const fromOne = Buffer.concat([Buffer.from([0, 1]), randomBytes(5000)]);
    writeFileSync(join(folder.one, 'photo.jpg'), fromOne);
    await eventually(async () => (await status('one')).waitingUp.files === 0, 'one sent', 30_000);
    await eventually(() => one.out.stdout.includes('sent photo.jpg\n'), 'one published', 30_000);
    await stop(one);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const fromTwo = Buffer.concat([Buffer.from([0, 2]), randomBytes(5000)]);
    writeFileSync(join(folder.two, 'photo.jpg'), fromTwo);
    two = start('two');
    one = start('one');
    const copies = (dir: string) =>
      readdirSync(dir).filter((name) => name.startsWith('photo.sync-conflict'));
    await eventually(
      () => copies(folder.one).length === 1 && copies(folder.two).length === 1,
      'a conflict copy on both',
      30_000,
    );
    const [copy] = copies(folder.one);
    expect(copy).toMatch(new RegExp(`^photo\\.sync-conflict-\\d{8}-\\d{6}-${deviceOne}\\.jpg$`));
    expect(copies(folder.two)).toEqual([copy]);
    await eventually(() => sameBytes(join(folder.one, 'photo.jpg'), fromTwo), 'newest at one');
    expect(sameBytes(join(folder.two, copy!), fromOne)).toBe(true);
    for (const which of ['one', 'two'] as const) {
      await eventually(
        async () => (await status(which)).conflicts.includes(copy!),
        `status of ${which} lists ${copy}`,
      );
    }
  }, 120_000);

  it("reports the folder's files and bytes to the host, which its storage API shows", async () => {
    const { th, folder, start } = await setUp();
    writeFileSync(join(folder.one, 'notes.md'), 'hello\n');
    writeFileSync(
      join(folder.one, 'scan.pdf'),
      Buffer.concat([Buffer.from([0]), randomBytes(9999)]),
    );
    start('one');
    const report = await eventually(
      async () => {
        const storage = (await th.admin('GET', '/storage')).body as {
          users: {
            projects: { room: string; folders: { doc: string; files: number; bytes: number }[] }[];
          }[];
        };
        const folders = storage.users.flatMap((user) =>
          user.projects.flatMap((p) => p.folders.map((folder) => ({ ...folder, room: p.room }))),
        );
        return folders.find((each) => each.files === 2);
      },
      'the folder report',
      30_000,
    );
    expect(report).toMatchObject({ files: 2, bytes: 6 + 10_000, encrypted: false, named: 2 });
    const query = `room=${encodeURIComponent(report.room)}&doc=${encodeURIComponent(report.doc)}`;
    const { names } = (await th.admin('GET', `/storage/names?${query}`)).body as {
      names: string[];
    };
    expect(names.sort()).toEqual(['notes.md', 'scan.pdf']);
  }, 60_000);

  it('shows one progress line on a terminal while a file goes up, and none in a log', async () => {
    const { th, folder, config, start, status } = await setUp();
    // Large enough to take more than the line's first second at the chunk path's speed.
    writeFileSync(join(folder.one, 'movie.bin'), randomBytes(80 * 1_048_576));
    process.env[progressDelayVariable] = '0';
    const one = spawnInTerminal(['sync', 'files', folder.one, '--relay', th.relayUrl], config.one);
    delete process.env[progressDelayVariable];
    try {
      await eventually(
        () => /sent movie\.bin \(new\)/.test(one.out.text),
        'movie.bin sent',
        60_000,
      );
      const erase = '\r\u001b[2K';
      expect(one.out.text).toContain(`${erase}sending movie.bin `);
      expect(one.out.text).toMatch(/sending movie\.bin \d+% of 80\.0 MiB/);
      // A line printed meanwhile starts on a cleared line, not after the progress text.
      expect(one.out.text).not.toMatch(/MiB(sent|in sync)/);
      // Stopped once the host has taken it all: a stop gives the host only 2 s to take the rest.
      await eventually(
        async () => (await status('one')).waitingUp.files === 0,
        'nothing waiting to go up',
        60_000,
      );
    } finally {
      one.child.kill('SIGTERM');
      await one.exited;
    }
    const two = start('two');
    await eventually(() => existsSync(join(folder.two, 'movie.bin')), 'movie.bin at two', 60_000);
    expect(two.out.stdout).not.toContain('receiving');
  }, 120_000);

  it('puts back a chunk damaged on the host from the running sync that has the file, unasked', async () => {
    const { th, folder, start } = await setUp();
    const binary = randomBytes(600_000);
    writeFileSync(join(folder.one, 'data.bin'), binary);
    const one = start('one');
    await eventually(() => one.out.stdout.includes('sent data.bin (new)\n'), 'one sent', 30_000);
    const storePath = join(th.dir, 'data', 'store.db');
    const chunks = storedChunks(storePath);
    const victim = chunks.find((chunk) => binary.includes(chunk.data.subarray(0, 64)))!;
    const flipped = Buffer.from(victim.data);
    flipped[100] = flipped[100]! ^ 0xff;
    overwriteStoredChunk(storePath, victim.id, flipped);
    const two = start('two');
    await eventually(
      () => sameBytes(join(folder.two, 'data.bin'), binary),
      'data.bin at two, byte for byte',
      60_000,
    );
    expect(two.out.stderr).toContain("failed its check 3 times: the host's copy is damaged");
    expect(one.out.stdout).toContain(
      'put data.bin back on the host (1 chunk(s) it no longer held)',
    );
    const row = storedChunks(storePath).find((chunk) => chunk.id === victim.id)!;
    expect(row.data.equals(victim.data)).toBe(true);
    await stop(two);
    await stop(one);
  }, 120_000);

  it('leaves a file waiting while the host store is full, and status says so', async () => {
    const { folder, config, start, status } = await setUp(['store.userMaxBytes=400000']);
    const big = randomBytes(1_500_000);
    writeFileSync(join(folder.one, 'video.bin'), big);
    const one = start('one');
    await eventually(async () => (await status('one')).storeFull, 'store full in status', 30_000);
    const json = await status('one');
    expect(json.waitingUp.files).toBe(1);
    expect(json.waitingUp.bytes).toBe(big.length);
    expect(one.out.stderr).toContain("the host's store is full: video.bin");
    const text = await cli(['status', 'files'], config.one);
    expect(text.stdout).toContain("the host's store is full");
    expect(text.stdout).toContain('waiting to go up: 1 file (1.4 MiB)');
    // Nothing of it is in the document: a device that comes later sees no file it cannot fetch.
    const two = start('two');
    await eventually(() => two.out.stdout.includes('in sync'), 'two in sync', 30_000);
    expect(existsSync(join(folder.two, 'video.bin'))).toBe(false);
  }, 120_000);

  it('syncs a 200 MiB file with each process under a fixed bound of resident memory (300 MB, 150 MB over idle)', async () => {
    const { folder, start } = await setUp();
    const one = start('one');
    const two = start('two');
    for (const run of [one, two]) {
      await eventually(() => run.out.stdout.includes('in sync'), 'in sync', 30_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const idle = { one: rssOf(one.child.pid), two: rssOf(two.child.pid) };
    const peak = { ...idle };
    const sample = setInterval(() => {
      for (const [which, run] of [
        ['one', one],
        ['two', two],
      ] as const) {
        peak[which] = Math.max(peak[which], rssOf(run.child.pid));
      }
    }, 100);
    // Written beside the folder and moved in whole: the sync reads it once.
    const file = join(folder.one, 'disk.img');
    const fd = openSync(`${folder.one}.img`, 'w');
    const block = randomBytes(1_048_576);
    for (let i = 0; i < 200; i += 1) {
      block[0] = i;
      writeSync(fd, block);
    }
    closeSync(fd);
    renameSync(`${folder.one}.img`, file);
    try {
      await eventually(() => existsSync(join(folder.two, 'disk.img')), 'disk.img at two', 240_000);
    } finally {
      clearInterval(sample);
    }
    const sent = readFileSync(file);
    expect(readFileSync(join(folder.two, 'disk.img')).equals(sent)).toBe(true);
    console.log(
      `200 MiB file: RSS sender ${mb(idle.one)} MB idle, ${mb(peak.one)} MB at most; receiver ${mb(idle.two)} MB idle, ${mb(peak.two)} MB at most`,
    );
    expect(idle.one).toBeGreaterThan(0);
    for (const which of ['one', 'two'] as const) {
      expect(peak[which], which).toBeLessThan(300 * 1_000_000);
      expect(peak[which] - idle[which], which).toBeLessThan(150 * 1_000_000);
    }
  }, 300_000);
});

/** The resident memory of a process in bytes (0 once it is gone). */
function rssOf(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    return kb === undefined ? 0 : Number(kb) * 1024;
  } catch {
    return 0;
  }
}

function mb(bytes: number): string {
  return (bytes / 1_000_000).toFixed(0);
}
