import { randomBytes } from 'node:crypto';
import {
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ChunkTransfer } from '../../../client/chunks/index.ts';
import { prefetchIdleVariable } from '../../../client/cli/sync-command.ts';
import { noticeSender } from '../../../client/folder/blob-notices.ts';
import { createRelayConnection } from '../../../client/relay-connection.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices } from './cli-devices.ts';

/**
 * `sync-host sync` fetching a file's chunks while another device still sends it: the receiver's
 * temporary file grows before the version is published, notices with names that never sync
 * write nothing, and a prefetch whose sender went away is removed.
 */

const idleMs = 2_000;
const { tempDir, setUp } = cliDevices('prefetch', {
  [prefetchIdleVariable]: String(idleMs),
});

const temps = (dir: string) => readdirSync(dir).filter((name) => name.endsWith('.sync-host-tmp'));

async function stop(run: CliRun): Promise<void> {
  run.child.kill('SIGTERM');
  expect(await run.exited).toBe(0);
}

/** Device one's room connection, without a sync: it sends notices by hand. */
async function rawDevice(setup: Awaited<ReturnType<typeof setUp>>) {
  const connection = createRelayConnection({
    url: setup.th.relayUrl,
    room: setup.roomId,
    device: String(setup.one.deviceId),
    token: setup.one.deviceToken,
    WebSocket,
    backoff: { initialDelayMs: 20, maxDelayMs: 200 },
  });
  await connection.connect();
  const transfer = new ChunkTransfer({ connection });
  /** Puts `bytes` as one chunk on the host and tells the room it is `path`'s first chunk. */
  const announce = async (path: string, bytes: Uint8Array) => {
    const id = await transfer.idOf(bytes);
    await transfer.put(id, bytes);
    const notices = noticeSender(connection, undefined, { path, size: bytes.length });
    notices.held({ id, size: bytes.length, offset: 0 });
    await notices.end();
    await connection.flush();
  };
  return {
    connection,
    announce,
    close: async () => {
      transfer.close();
      await connection.close();
    },
  };
}

/** Device two syncing, and device one sending notices by hand. */
async function receiverAndSender() {
  const setup = await setUp();
  const two = setup.start('two');
  await eventually(() => two.out.stdout.includes('in sync'), 'two in sync', 30_000);
  return { folder: setup.folder, two, device: await rawDevice(setup) };
}

describe('sync-host sync fetching a file while it goes up', () => {
  it.each([{ sealed: false }, { sealed: true }])(
    "receives most of a file's bytes before the sender has published it, then the file byte for byte (sealed: $sealed)",
    async ({ sealed }) => {
      const passphrase = join(tempDir(), 'passphrase');
      writeFileSync(passphrase, 'the passphrase\n', { mode: 0o600 });
      const setup = await setUp({
        syncArgs: sealed ? ['--encrypt', '--passphrase-file', passphrase] : [],
      });
      const { folder, start } = setup;
      const one = start('one');
      const two = start('two');
      for (const run of [one, two]) {
        await eventually(() => run.out.stdout.includes('peers: '), 'both in the room', 30_000);
      }
      const bytes = randomBytes(48 * 1_048_576);
      // Written beside the folder, then moved in: device one reads it whole.
      const outside = join(tempDir(), 'movie.bin');
      writeFileSync(outside, bytes);
      renameSync(outside, join(folder.one, 'movie.bin'));
      let earlyBytes = 0;
      await eventually(
        () => {
          if (!one.out.stdout.includes('sent movie.bin')) {
            for (const temp of temps(folder.two)) {
              earlyBytes = Math.max(earlyBytes, statSync(join(folder.two, temp)).size);
            }
          }
          const file = join(folder.two, 'movie.bin');
          return existsSync(file) && statSync(file).size === bytes.length;
        },
        'the file at two',
        60_000,
      );
      expect(readFileSync(join(folder.two, 'movie.bin')).equals(bytes)).toBe(true);
      // Before device one published the version, device two had a quarter of it at least.
      expect(earlyBytes).toBeGreaterThanOrEqual(bytes.length / 4);
      expect(temps(folder.two)).toEqual([]);
      // Taken over by the download, not fetched again after a failed check.
      expect(two.out.stderr).not.toContain('movie.bin');
      await stop(one);
      await stop(two);
    },
    120_000,
  );

  it('writes nothing for a notice whose name never syncs here', async () => {
    const { folder, two, device } = await receiverAndSender();
    // Where '../x' and 'a/../../y' would land: the folder's parent, the system's temporary
    // folder, where other programs may have an x or a y of their own (as they were before).
    const outside = () =>
      readdirSync(dirname(folder.two))
        .filter((name) => name === 'x' || name === 'y')
        .map((name) => {
          const stats = statSync(join(dirname(folder.two), name));
          return `${name} ${stats.mtimeMs} ${stats.size}`;
        });
    const before = outside();
    const chunk = randomBytes(10_000);
    for (const hostile of ['../x', '.git/config', '.sync-host-folder', 'a/../../y']) {
      await device.announce(hostile, chunk);
    }
    // A name that syncs, sent after them: once its prefetch shows, the others were handled.
    await device.announce('fine.bin', chunk);
    await eventually(() => temps(folder.two).length === 1, 'the prefetch of fine.bin', 20_000);
    expect(temps(folder.two)[0]).toMatch(/^\.fine\.bin\.[0-9a-f]{8}\.sync-host-tmp$/);
    expect(readdirSync(folder.two).sort()).toEqual(
      ['.sync-host-folder', temps(folder.two)[0]].sort(),
    );
    expect(outside()).toEqual(before);
    await device.close();
    await stop(two);
  }, 60_000);

  it('removes the temporary file of a prefetch whose sender stopped, and at exit', async () => {
    const { folder, two, device } = await receiverAndSender();
    await device.announce('abandoned.bin', randomBytes(20_000));
    await eventually(() => temps(folder.two).length === 1, 'the prefetch', 20_000);
    // No publish, no further notice: dropped after the idle bound.
    await eventually(() => temps(folder.two).length === 0, 'the prefetch dropped', idleMs * 5);
    expect(existsSync(join(folder.two, 'abandoned.bin'))).toBe(false);
    // One the sync stops with goes with it.
    await device.announce('left.bin', randomBytes(20_000));
    await eventually(() => temps(folder.two).length === 1, 'the second prefetch', 20_000);
    await stop(two);
    expect(temps(folder.two)).toEqual([]);
    expect(existsSync(join(folder.two, 'left.bin'))).toBe(false);
    await device.close();
  }, 60_000);
});
