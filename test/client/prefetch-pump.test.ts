import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChunkTransfer } from '../../client/chunks/index.ts';
import { type BlobTransfer, blobTransferOf } from '../../client/cli/blob-transfer.ts';
import { Prefetches } from '../../client/cli/folder-prefetch.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { openYjsRoom, type YjsRoom } from './yjs-room.ts';

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
});
