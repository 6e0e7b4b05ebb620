import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { ChunkTransfer, downloadFile, uploadFile } from '../../../client/chunks/index.ts';
import { deriveE2EKey, type E2EKey } from '../../../client/e2e-key.ts';
import type { SyncError } from '../../../client/errors.ts';
import { Disk } from '../../../client/folder/disk.ts';
import type { RelayConnection } from '../../../client/relay-connection.ts';
import { startTestHost, type TestHost } from '../../helpers/host.ts';
import { metricAt } from '../../helpers/metrics.ts';
import { overwriteStoredChunk, storedChunks } from '../../helpers/stored-chunks.ts';
import { eventually } from '../../helpers/wait.ts';
import { trackedWebSocket } from '../host.ts';
import { exposes, storeFilesText } from '../plaintext.ts';
import { openYjsRoom, type YjsRoom } from '../yjs-room.ts';

/**
 * The chunk library against the real host (auth, relay and its store.db in process): files go
 * up from one device and come back on another, the host's counters and store.db show what it
 * was sent and keeps.
 */

const marker = 'PLAINTEXT-MARKER-OF-A-FILE';

/**
 * `ws` as the client sees a browser's WebSocket: no `terminate`, so frames come through
 * `onmessage` (text as strings, binary as the `binaryType` the client sets) and bytes are sent
 * as binary frames.
 */
class BrowserLike extends WebSocket {}
Object.defineProperty(BrowserLike.prototype, 'terminate', { value: undefined });

/** A file of `chunks` full chunks of random bytes, each holding the marker, and a short tail. */
function sample(chunkBytes: number, chunks: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < chunks; i += 1) {
    const part = randomBytes(chunkBytes);
    part.write(`${marker} ${i}`, 100);
    parts.push(part);
  }
  return Buffer.concat([...parts, Buffer.from(`${marker} tail `), randomBytes(100)]);
}

async function rejection(promise: Promise<unknown>): Promise<SyncError> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err as SyncError,
  );
}

/** One counter of the relay's `/metrics` (with its labels, as written). */
const metric = (th: TestHost, name: string) => metricAt(th.host.urls.status!, name);

const storedNew = 'sync_host_store_chunks_stored_total{kind="new"}';
const storedHeld = 'sync_host_store_chunks_stored_total{kind="held"}';

describe('file chunks through the real host', () => {
  let th: TestHost;
  let room: YjsRoom;
  let dir: string;
  let key: E2EKey;
  const transfers: ChunkTransfer[] = [];

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    room = await openYjsRoom(th, 'files@example.org', 'files', 2);
    dir = mkdtempSync(join(tmpdir(), 'sync-host-chunks-'));
    key = await deriveE2EKey('correct horse', room.roomId, 1000);
  });

  afterAll(async () => {
    for (const t of transfers) t.close();
    await room?.close();
    await th?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function device(
    index: number,
    options: { key?: E2EKey; connection?: RelayConnection } = {},
  ): Promise<ChunkTransfer> {
    const connection = options.connection ?? (await room.connect(index)).connection;
    const t = new ChunkTransfer({ connection, key: options.key });
    transfers.push(t);
    return t;
  }

  function write(name: string, bytes: Uint8Array): string {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  }

  it('brings a file from one device to another byte for byte, in the clear and sealed', async () => {
    for (const sealed of [false, true]) {
      const options = sealed ? { key } : {};
      const [laptop, desktop] = [await device(0, options), await device(1, options)];
      const bytes = sample(laptop.chunkBytes, 3);
      const name = sealed ? 'sealed' : 'clear';
      const up = await uploadFile(laptop, write(`${name}.bin`, bytes));
      expect(up.chunks).toHaveLength(4);
      const down = await downloadFile(desktop, up.chunks, join(dir, `${name}.tmp`));
      expect(down).toEqual({ size: bytes.length, digest: up.digest });
      expect(readFileSync(join(dir, `${name}.tmp`)).equals(bytes)).toBe(true);
    }
    // The clear file's chunks are readable on the host's disk; the sealed one's are not.
    const stored = storeFilesText(join(th.dir, 'data'));
    expect(stored).toContain(`${marker} 0`);
    expect(exposes(stored.replaceAll(`${marker} `, ''), marker)).toBe(false);
  });

  it("brings a file in binary frames through sockets of a browser's kind (strings and ArrayBuffers)", async () => {
    const binary = 'sync_host_store_chunk_binary_frames_total';
    const before = {
      in: await metric(th, `${binary}{direction="received"}`),
      out: await metric(th, `${binary}{direction="sent"}`),
    };
    const [laptop, desktop] = [
      await device(0, {
        connection: (await room.connect(0, { WebSocket: BrowserLike })).connection,
      }),
      await device(1, {
        connection: (await room.connect(1, { WebSocket: BrowserLike })).connection,
      }),
    ];
    const bytes = sample(laptop.chunkBytes, 2);
    const up = await uploadFile(laptop, write('browser.bin', bytes));
    const down = await downloadFile(desktop, up.chunks, join(dir, 'browser.tmp'));
    expect(down).toEqual({ size: bytes.length, digest: up.digest });
    expect(readFileSync(join(dir, 'browser.tmp')).equals(bytes)).toBe(true);
    expect(await metric(th, `${binary}{direction="received"}`)).toBe(before.in + 3);
    expect(await metric(th, `${binary}{direction="sent"}`)).toBe(before.out + 3);
  });

  it('never sends a chunk the host holds again: only the changed chunk of a file goes', async () => {
    const [laptop, desktop] = [await device(0), await device(1)];
    const bytes = sample(laptop.chunkBytes, 6);
    const path = write('unchanged.bin', bytes);
    const before = { new: await metric(th, storedNew), held: await metric(th, storedHeld) };
    const first = await uploadFile(laptop, path);
    expect(await metric(th, storedNew)).toBe(before.new + 7);
    // The same file from another device: chunk-have says every chunk is there, no put at all.
    expect(await uploadFile(desktop, path)).toEqual(first);
    expect(await metric(th, storedNew)).toBe(before.new + 7);
    expect(await metric(th, storedHeld)).toBe(before.held);
    // One byte changed in the middle: one chunk goes.
    bytes[3 * laptop.chunkBytes + 10]! ^= 0xff;
    const changed = await uploadFile(laptop, write('unchanged.bin', bytes));
    expect(changed.chunks.filter((c, i) => c.id !== first.chunks[i]!.id)).toHaveLength(1);
    expect(await metric(th, storedNew)).toBe(before.new + 8);
    expect(await metric(th, storedHeld)).toBe(before.held);
  });

  it('writes a download only into the temporary file made for it, not where a folder swapped for a link leads', async () => {
    const [laptop, desktop] = [await device(0), await device(1)];
    const up = await uploadFile(laptop, write('swap.bin', sample(laptop.chunkBytes, 1)));
    const folder = join(dir, 'swap-folder');
    const outside = join(dir, 'swap-outside');
    mkdirSync(join(folder, 'sub'), { recursive: true });
    mkdirSync(outside);
    const disk = new Disk(folder);
    const made = disk.writeTemp('sub/photo.bin', '');
    if ('problem' in made) throw new Error(made.problem);
    // sub becomes a link outside, where a file of the temporary file's name waits.
    renameSync(join(folder, 'sub'), join(folder, 'sub-moved'));
    symlinkSync(outside, join(folder, 'sub'));
    const trap = join(outside, made.temp.slice('sub/'.length));
    writeFileSync(trap, '');
    const refused = await rejection(
      downloadFile(desktop, up.chunks, disk.at(made.temp), undefined, undefined, made.ino),
    );
    expect(refused.code).toBe('folder_unusable');
    expect(readFileSync(trap).length).toBe(0);
    // With no such file there, nothing is made outside either.
    rmSync(trap);
    await expect(
      downloadFile(desktop, up.chunks, disk.at(made.temp), undefined, undefined, made.ino),
    ).rejects.toThrow(/ENOENT/);
    expect(readdirSync(outside)).toEqual([]);
  });

  it('detects a chunk damaged in store.db, never returns it, and has the host drop it so it is put again', async () => {
    for (const sealed of [false, true]) {
      const options = sealed ? { key } : {};
      const [laptop, desktop] = [await device(0, options), await device(1, options)];
      const bytes = sample(laptop.chunkBytes, 2);
      const up = await uploadFile(laptop, write('damaged.bin', bytes));
      const victim = up.chunks[1]!.id;
      // One byte of the stored bytes changed (set to 0, or to 1 where it was 0).
      const storePath = join(th.dir, 'data', 'store.db');
      const damaged = Buffer.from(storedChunks(storePath).find((c) => c.id === victim)!.data);
      damaged[200] = damaged[200] === 0 ? 1 : 0;
      overwriteStoredChunk(storePath, victim, damaged);
      const sent = await metric(th, 'sync_host_store_chunks_sent_total');
      const temp = join(dir, 'damaged.tmp');
      const error = await rejection(downloadFile(desktop, up.chunks, temp));
      expect(error.code).toBe('chunk_corrupt');
      expect(existsSync(temp)).toBe(false);
      // The first chunk once, the damaged one three times; nothing after it was written.
      expect(await metric(th, 'sync_host_store_chunks_sent_total')).toBeGreaterThanOrEqual(
        sent + 4,
      );
      // Reported: the host dropped its damaged copy, which counts as missing now.
      expect((await rejection(desktop.get(victim))).code).toBe('chunk_missing');
      expect(await laptop.held([victim])).toEqual(new Set());
      await uploadFile(laptop, write('damaged.bin', bytes));
      expect(
        Buffer.from(await desktop.get(victim)).equals(
          bytes.subarray(laptop.chunkBytes, 2 * laptop.chunkBytes),
        ),
      ).toBe(true);
      expect(
        Buffer.from(await desktop.get(up.chunks[0]!.id)).equals(
          bytes.subarray(0, laptop.chunkBytes),
        ),
      ).toBe(true);
    }
  });

  it('rejects the calls waiting when the connection drops; they work after the rejoin', async () => {
    const { WebSocket, sockets } = trackedWebSocket();
    const { connection } = await room.connect(1, { WebSocket });
    const [laptop, desktop] = [await device(0), await device(1, { connection })];
    const bytes = sample(laptop.chunkBytes, 12);
    const up = await uploadFile(laptop, write('dropped.bin', bytes));
    let received = 0;
    const download = downloadFile(desktop, up.chunks, join(dir, 'dropped.tmp'), (n) => {
      received += n;
      if (received === laptop.chunkBytes) sockets.at(-1)!.terminate();
    });
    expect((await rejection(download)).code).toBe('not_joined');
    await eventually(() => connection.state === 'joined', 'the rejoin');
    const again = await downloadFile(desktop, up.chunks, join(dir, 'dropped.tmp'));
    expect(again.digest).toBe(up.digest);
  });
});

describe('file chunks through a host whose store is full', () => {
  let th: TestHost;
  let room: YjsRoom;
  let dir: string;

  beforeAll(async () => {
    th = await startTestHost({ ui: false, relay: ['store.userMaxBytes=600000'] });
    room = await openYjsRoom(th, 'full@example.org', 'full', 1);
    dir = mkdtempSync(join(tmpdir(), 'sync-host-chunks-'));
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails the upload with store_full once the user’s bytes are used up', async () => {
    const { connection } = await room.connect(0);
    const t = new ChunkTransfer({ connection });
    const path = join(dir, 'big.bin');
    writeFileSync(path, randomBytes(4 * t.chunkBytes));
    const error = await rejection(uploadFile(t, path));
    expect(error.code).toBe('store_full');
    expect(await metric(th, 'sync_host_store_chunks_refused_total{reason="full"}')).toBeGreaterThan(
      0,
    );
    t.close();
  });
});
