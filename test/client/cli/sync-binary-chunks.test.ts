import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { textChunksVariable } from '../../../client/cli/project-room.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { metricAt } from '../../helpers/metrics.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices } from './cli-devices.ts';

/**
 * Two `sync-host sync` processes of one folder, one sending and fetching its chunks in binary
 * frames (the default), the other in text frames with base64 (SYNC_HOST_TEXT_CHUNKS=1): each
 * gets the other's files byte for byte, and the host's counters show which form each used.
 */

const { setUp } = cliDevices('binary-chunks');

const chunkBytes = 256 * 1024;
const binaryIn = 'sync_host_store_chunk_binary_frames_total{direction="received"}';
const binaryOut = 'sync_host_store_chunk_binary_frames_total{direction="sent"}';
const putsIn = 'sync_host_store_chunks_received_total';
const chunksOut = 'sync_host_store_chunks_sent_total';

function sameBytes(file: string, expected: Buffer): boolean {
  return existsSync(file) && readFileSync(file).equals(expected);
}

async function stop(run: CliRun): Promise<void> {
  run.child.kill('SIGTERM');
  expect(await run.exited).toBe(0);
}

describe('sync-host sync with chunks in binary and in text frames', () => {
  it('syncs one folder between a device sending binary frames and one sending text frames', async () => {
    const { th, folder, start } = await setUp();
    const metric = (name: string) => metricAt(th.host.urls.status!, name);
    // Not text (a NUL), three full chunks and a short one each.
    const fromOne = Buffer.concat([Buffer.from([0]), randomBytes(3 * chunkBytes + 999)]);
    const fromTwo = Buffer.concat([Buffer.from([0]), randomBytes(3 * chunkBytes + 555)]);
    writeFileSync(join(folder.one, 'from-one.bin'), fromOne);

    // The binary device puts its file's chunks in binary frames (4: three full, one short).
    const one = start('one');
    await eventually(() => one.out.stdout.includes('sent from-one.bin (new)\n'), 'one sent');
    const putByOne = await metric(putsIn);
    expect(putByOne).toBeGreaterThanOrEqual(4);
    expect(await metric(binaryIn)).toBe(putByOne);

    // The text device fetches them in text frames, and puts its own file in text frames.
    const two = start('two', { [textChunksVariable]: '1' });
    await eventually(() => sameBytes(join(folder.two, 'from-one.bin'), fromOne), 'at two', 60_000);
    const fetchedByTwo = await metric(chunksOut);
    expect(fetchedByTwo).toBeGreaterThanOrEqual(4);
    expect(await metric(binaryOut)).toBe(0);
    writeFileSync(join(folder.two, 'from-two.bin'), fromTwo);
    await eventually(() => two.out.stdout.includes('sent from-two.bin (new)\n'), 'two sent');
    expect(await metric(putsIn)).toBeGreaterThanOrEqual(putByOne + 4);
    expect(await metric(binaryIn)).toBe(putByOne);

    // The binary device fetches them in binary frames.
    await eventually(() => sameBytes(join(folder.one, 'from-two.bin'), fromTwo), 'at one', 60_000);
    const fetchedByOne = (await metric(chunksOut)) - fetchedByTwo;
    expect(fetchedByOne).toBeGreaterThanOrEqual(4);
    expect(await metric(binaryOut)).toBe(fetchedByOne);
    await stop(two);
    await stop(one);
    expect(one.out.stderr).toBe('');
    expect(two.out.stderr).toBe('');
  }, 120_000);
});
