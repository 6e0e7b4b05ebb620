import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { metricAt } from '../helpers/metrics.ts';
import type { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { chunkCall, plainId, putChunk, sealedId, testKey } from '../helpers/store-client.ts';
import { overwriteStoredChunk, storedChunks } from '../helpers/stored-chunks.ts';

/**
 * `chunk-bad`: a device reports chunks that failed its check; the host drops only a damaged copy
 * (an unencrypted one whose bytes no longer hash to its id; a sealed one on the proof of its
 * key), answers `chunk-dropped` and tells the room's devices `chunks-lost`.
 */

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const metric = (name: string) => metricAt(harness!.statusUrl, name);

/** What one chunk counts against the bounds: bytes + 64 + its id (44) and kc. */
const counted = (data: Buffer, kc = '') => data.length + 64 + 44 + kc.length;

/** Flips one byte of a chunk's stored bytes on the host's disk, as disk rot would. */
function damage(room: string, id: string): void {
  const storePath = join(harness!.dir, 'store.db');
  const data = Buffer.from(storedChunks(storePath, room).find((c) => c.id === id)!.data);
  data[0] = data[0]! ^ 0xff;
  overwriteStoredChunk(storePath, id, data);
}

const lostFrames = (client: RelayClient) => client.frames.filter((f) => f.type === 'chunks-lost');

describe('chunk-bad: a chunk found damaged', () => {
  it('drops an unencrypted chunk only when its bytes no longer hash to its id, and tells the room', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const { client: desktop } = await harness.joined(room, 1, 2);
    const { client: elsewhere } = await harness.joined(harness.room(2), 2, 3);
    const good = randomBytes(5000);
    const rotten = randomBytes(7000);
    await putChunk(laptop, 1, good);
    await putChunk(laptop, 2, rotten);
    const bytes = await metric('sync_host_store_bytes');
    expect(bytes).toBe(counted(good) + counted(rotten));

    // A report about a good chunk changes nothing: a device cannot have a good chunk dropped.
    const ids = [plainId(good), plainId(rotten)];
    expect(await chunkCall(desktop, { type: 'chunk-bad', ref: 1, ids })).toEqual({
      type: 'chunk-dropped',
      ref: 1,
      ids: [],
    });
    expect(await chunkCall(desktop, { type: 'chunk-have', ref: 2, ids })).toMatchObject({ ids });
    expect(await metric('sync_host_store_bytes')).toBe(bytes);

    damage(room, plainId(rotten));
    expect(await chunkCall(desktop, { type: 'chunk-bad', ref: 3, ids })).toEqual({
      type: 'chunk-dropped',
      ref: 3,
      ids: [plainId(rotten)],
    });
    // Every device of the room hears of it, the reporter too; another room does not.
    for (const device of [laptop, desktop]) {
      expect(await device.take((f) => f.type === 'chunks-lost')).toEqual({
        type: 'chunks-lost',
        ids: [plainId(rotten)],
      });
    }
    expect(await chunkCall(laptop, { type: 'chunk-have', ref: 3, ids })).toMatchObject({
      ids: [plainId(good)],
    });
    expect(await metric('sync_host_store_bytes')).toBe(counted(good));
    expect(await metric('sync_host_store_chunk_bytes')).toBe(counted(good));
    expect(await metric('sync_host_store_chunks_dropped_total')).toBe(1);

    // Put again by the device that has it: stored anew, given back intact.
    expect(await putChunk(laptop, 4, rotten)).toMatchObject({ type: 'chunk-stored' });
    const got = await chunkCall(desktop, { type: 'chunk-get', ref: 4, id: plainId(rotten) });
    expect(Buffer.from(got.data as string, 'base64').equals(rotten)).toBe(true);
    expect(await metric('sync_host_store_bytes')).toBe(bytes);
    await elsewhere.sync();
    expect(lostFrames(elsewhere)).toEqual([]);
    expect(lostFrames(desktop)).toHaveLength(1);
  });

  it('drops a sealed chunk only on the proof of its key: without it or with another key, an error and nothing dropped', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const { client: intruder } = await harness.joined(room, 1, 2);
    const mine = testKey('mine');
    const id = sealedId('chunk 1');
    const sealed = randomBytes(1000);
    await putChunk(laptop, 1, sealed, { id, ...mine });
    const bytes = counted(sealed, mine.kc);
    expect(await metric('sync_host_store_bytes')).toBe(bytes);

    // A device that saw kc on the wire but has no proof of the key.
    const attempts = [{ kc: mine.kc }, { kc: mine.kc, kp: testKey('theirs').kp }];
    for (const [i, attempt] of attempts.entries()) {
      const frame = { type: 'chunk-bad', ref: 10 + i, ids: [id], ...attempt };
      const refused = await chunkCall(intruder, frame);
      expect(refused).toMatchObject({ type: 'error', code: 'invalid_message', ref: 10 + i });
      expect(refused.message).toContain('kp');
    }
    // Without kc it names an unencrypted chunk: the sealed one is another.
    expect(await chunkCall(intruder, { type: 'chunk-bad', ref: 12, ids: [id] })).toMatchObject({
      type: 'chunk-dropped',
      ids: [],
    });
    expect(
      await chunkCall(laptop, { type: 'chunk-have', ref: 2, ids: [id], kc: mine.kc }),
    ).toMatchObject({ ids: [id] });
    expect(await metric('sync_host_store_bytes')).toBe(bytes);
    await laptop.sync();
    expect(lostFrames(laptop)).toEqual([]);

    // A holder of the key: the host cannot check the chunk, it takes the key's word for it.
    expect(await chunkCall(laptop, { type: 'chunk-bad', ref: 3, ids: [id], ...mine })).toEqual({
      type: 'chunk-dropped',
      ref: 3,
      ids: [id],
    });
    expect(await intruder.take((f) => f.type === 'chunks-lost')).toEqual({
      type: 'chunks-lost',
      ids: [id],
      kc: mine.kc,
    });
    expect(
      await chunkCall(laptop, { type: 'chunk-have', ref: 4, ids: [id], kc: mine.kc }),
    ).toMatchObject({ ids: [] });
    expect(await metric('sync_host_store_bytes')).toBe(0);
  });
});
