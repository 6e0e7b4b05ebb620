import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkTransfer, type PlacedChunk } from '../../client/chunks/index.ts';
import { type BlobTransfer, blobTransferOf } from '../../client/folder/blob-transfer.ts';
import { Disk } from '../../client/folder/disk.ts';
import { Prefetches } from '../../client/folder/prefetch.ts';
import { openYjsRoom, type YjsRoom } from '../client/yjs-room.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

/** Resolves after `n` turns of the microtask queue. */
async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i += 1) await Promise.resolve();
}

describe('fetching ahead (Prefetches) against the real host', () => {
  let th: TestHost;
  let room: YjsRoom;
  let dir: string;

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    room = await openYjsRoom(th, 'prefetch@example.org', 'prefetch', 2);
    dir = mkdtempSync(join(tmpdir(), 'sync-host-prefetch-'));
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fetches a chunk named while a run of fetches is ending, whatever the moment', async () => {
    const sender = new ChunkTransfer({ connection: (await room.connect(0)).connection });
    const receiver = blobTransferOf((await room.connect(1)).connection, undefined);
    const size = 2 * 4096;
    const parts = [randomBytes(4096), randomBytes(4096)];
    const chunks = await Promise.all(
      parts.map(async (bytes, i) => {
        const id = await sender.idOf(bytes);
        await sender.put(id, bytes);
        return { id, size: bytes.length, offset: i * 4096 };
      }),
    );
    // The second notice comes n microtask turns after the first chunk's fetch resolved: across
    // the end of the run that fetched it (its loop, then its settling).
    for (let n = 0; n < 12; n += 1) {
      const path = `file-${n}.bin`;
      let prefetches: Prefetches | undefined;
      const timed: BlobTransfer = {
        ...receiver,
        async fetchInto(batch, temp, onChunk) {
          await receiver.fetchInto(batch, temp, onChunk);
          if (batch[0]?.offset !== 0) return;
          void ticks(n).then(() =>
            prefetches!.notice('one', { upload: 'u', path, size, chunks: [chunks[1]!] }),
          );
        },
      };
      prefetches = new Prefetches({
        dir,
        disk: new Disk(dir),
        transfer: () => timed,
        ignores: () => false,
        maxFileBytes: () => 1 << 30,
        busyTemps: new Set(),
      });
      prefetches.notice('one', { upload: 'u', path, size, chunks: [chunks[0]!] });
      // Both chunks land in the temporary file with no later notice to wake the fetching up.
      const whole = Buffer.concat(parts);
      const temp = await eventually(
        () =>
          readdirSync(dir).find(
            (name) => name.startsWith(`.${path}.`) && readFileSync(join(dir, name)).equals(whole),
          ),
        `both chunks of ${path} fetched (second notice ${n} turns after the first fetch)`,
        3_000,
      );
      const version = { chunks: chunks.map((c) => [c.id, c.size] as [string, number]), size };
      const got = await prefetches.claim(path, version);
      expect(got?.temp).toBe(temp);
      expect(got?.resume.present).toEqual(new Set([0, 1]));
      prefetches.close();
      rmSync(join(dir, temp), { force: true });
    }
    sender.close();
    receiver.close();
  }, 60_000);

  it('carries a prefetch on to a newer upload of the file, fetching only the chunks that differ', async () => {
    const sender = new ChunkTransfer({ connection: (await room.connect(0)).connection });
    const receiver = blobTransferOf((await room.connect(1)).connection, undefined);
    const [p0, p1, changed, p2] = [0, 1, 2, 3].map(() => randomBytes(4096));
    const placed = async (bytes: Buffer, offset: number): Promise<PlacedChunk> => {
      const id = await sender.idOf(bytes);
      await sender.put(id, bytes);
      return { id, size: bytes.length, offset };
    };
    // The first upload read the file while it was being written: two chunks of it, the second
    // of which changed since; the second upload is the whole file.
    const first = [await placed(p0!, 0), await placed(p1!, 4096)];
    const second = [first[0]!, await placed(changed!, 4096), await placed(p2!, 8192)];
    const fetched: string[] = [];
    const counted: BlobTransfer = {
      ...receiver,
      async fetchInto(batch, temp, onChunk) {
        fetched.push(...batch.map((chunk) => chunk.id));
        await receiver.fetchInto(batch, temp, onChunk);
      },
    };
    const prefetches = new Prefetches({
      dir,
      disk: new Disk(dir),
      transfer: () => counted,
      ignores: () => false,
      maxFileBytes: () => 1 << 30,
      busyTemps: new Set(),
    });
    const path = 'growing.bin';
    prefetches.notice('one', { upload: 'u1', path, size: 8192, chunks: first });
    await eventually(() => fetched.length === 2, 'the first upload fetched', 3_000);
    prefetches.notice('one', { upload: 'u2', path, size: 12_288, chunks: second });
    // a late notice of the first upload changes nothing
    prefetches.notice('one', { upload: 'u1', path, size: 8192, chunks: first });
    const whole = Buffer.concat([p0!, changed!, p2!]);
    const temp = await eventually(
      () =>
        readdirSync(dir).find(
          (name) => name.startsWith(`.${path}.`) && readFileSync(join(dir, name)).equals(whole),
        ),
      'the newer upload written in the same temporary file',
      3_000,
    );
    expect(fetched).toEqual([first[0]!.id, first[1]!.id, second[1]!.id, second[2]!.id]);
    const version = { chunks: second.map((c) => [c.id, c.size] as [string, number]), size: 12_288 };
    const got = await prefetches.claim(path, version);
    expect(got?.temp).toBe(temp);
    expect(got?.resume.present).toEqual(new Set([0, 1, 2]));
    // what the prefetch hashed is the file as it is now (the changed chunk came over hashed bytes)
    const hashed = got!.resume.hashedBytes;
    const prefix = createHash('sha256').update(whole.subarray(0, hashed)).digest('hex');
    expect(got!.resume.hash.copy().digest('hex')).toBe(prefix);
    prefetches.close();
    rmSync(join(dir, temp), { force: true });
    sender.close();
    receiver.close();
  });
});
