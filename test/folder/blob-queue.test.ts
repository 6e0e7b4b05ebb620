import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { exposes, storeFilesText } from '../client/plaintext.ts';
import { overwriteStoredChunk, storedChunks } from '../helpers/stored-chunks.ts';
import { eventually } from '../helpers/wait.ts';
import { allSent, type FolderDevice, putFile, twoDeviceFixture } from './devices.ts';

/**
 * Files that are not text (binary, or text over 1 MiB) through the host's chunk store, with two
 * devices of one folder running the folder sync on real relay connections: a device that comes
 * after the sender stopped gets them byte for byte; versions made apart are both kept, under
 * the conflict name on every device; `.syncignore` keeps ignored ones off the host; a chunk
 * damaged on the host is never written, and the device that holds it puts it back unasked.
 */

const { fixture, twoDevices: devicesOf } = twoDeviceFixture('blobs');
const put = putFile;

function read(dir: string, path: string): Buffer | undefined {
  try {
    return readFileSync(join(dir, path));
  } catch {
    return undefined;
  }
}

/** Two devices of a fresh project (not started). */
function twoDevices(passphrase?: string): Promise<[FolderDevice, FolderDevice]> {
  return devicesOf({ passphrase, limits: { filesPerMinute: 1000, bytesPerMinute: 1 << 30 } });
}

/** The bytes the host's chunks count, from the relay's /metrics. */
async function chunkBytes(): Promise<number> {
  const metrics = await (await fetch(`${fixture.th.host.urls.status}/metrics`)).text();
  const value = /^sync_host_store_chunk_bytes (\d+)$/m.exec(metrics)?.[1];
  if (value === undefined) throw new Error('no sync_host_store_chunk_bytes in /metrics');
  return Number(value);
}

/** Stops `device` once the relay took what it sent. */
async function stopWhenStored(device: FolderDevice): Promise<void> {
  await device.flush();
  await device.stop();
}

describe('files kept as chunks', () => {
  for (const passphrase of [undefined, 'blob passphrase']) {
    it(`reach a device that starts after the sender stopped, byte for byte${passphrase ? ' (encrypted)' : ''}`, async () => {
      const [a, b] = await twoDevices(passphrase);
      const binary = randomBytes(3 * 1_048_576);
      const marker = `long-text-${passphrase ? 'sealed' : 'plain'}`;
      const text = Buffer.from(`${marker} line of a long text\n`.repeat(76_000)); // 2.0 MiB
      put(a.dir, 'media/photo.bin', binary);
      put(a.dir, 'long.txt', text);
      await a.start();
      await allSent(a, 'a sent its files');
      await eventually(
        () => a.lines.some((line) => line.startsWith('sent long.txt')),
        'long.txt published',
      );
      await stopWhenStored(a);
      await b.start();
      try {
        await eventually(
          () => read(b.dir, 'media/photo.bin') !== undefined && read(b.dir, 'long.txt'),
          'both files at b',
          60_000,
        );
        expect(read(b.dir, 'media/photo.bin')!.equals(binary)).toBe(true);
        expect(read(b.dir, 'long.txt')!.equals(text)).toBe(true);
        const stored = storeFilesText(join(fixture.th.dir, 'data'));
        // The host holds the chunks; sealed ones show nothing of the file.
        expect(exposes(stored, marker)).toBe(!passphrase);
      } finally {
        await b.stop();
      }
    }, 120_000);
  }

  it('does not read a file kept as chunks again at a restart when its stamp is unchanged', async () => {
    const [a, b] = await twoDevices();
    put(a.dir, 'archive.zip', randomBytes(2 * 1_048_576));
    await a.start();
    await b.start();
    try {
      await eventually(() => read(b.dir, 'archive.zip'), 'archive.zip at b', 30_000);
      for (const device of [a, b]) {
        await device.stop();
        await device.start();
        // The start's scan found nothing to hash or send.
        expect(device.folder!.folderStatus().blobsUp).toEqual({ files: 0, bytes: 0 });
      }
      put(a.dir, 'archive.zip', randomBytes(1_048_576));
      a.scan();
      expect(a.folder!.folderStatus().blobsUp).toEqual({ files: 1, bytes: 1_048_576 });
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  it('sends a file read while a turn of the upload queue that found nothing has not ended yet', async () => {
    const [a, b] = await twoDevices();
    await a.start();
    await b.start();
    try {
      await eventually(() => a.joined && b.joined, 'both joined', 30_000);
      const bytes = Buffer.concat([Buffer.from([0]), randomBytes(4096)]);
      put(a.dir, 'late.bin', bytes);
      // A turn of each queue (as at a rejoin) finds nothing; the scan right after queues the file
      // before that turn has ended. Nothing else wakes the queue up here.
      a.folder!.resume();
      a.scan();
      await eventually(() => read(b.dir, 'late.bin')?.equals(bytes), 'late.bin at b', 30_000);
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  it('moves many small files several at a time each way, every one byte for byte', async () => {
    const [a, b] = await twoDevices();
    const files = Array.from({ length: 40 }, (_, n) => ({
      path: `photos/${n}.bin`,
      bytes: Buffer.concat([Buffer.from([0]), randomBytes(64 * 1024)]),
    }));
    for (const { path, bytes } of files) put(a.dir, path, bytes);
    const most = { up: 0, down: 0 };
    const look = setInterval(() => {
      for (const [device, direction] of [
        [a, 'up'],
        [b, 'down'],
      ] as const) {
        const running = device.folder?.transfers().filter((t) => t.direction === direction);
        most[direction] = Math.max(most[direction], running?.length ?? 0);
      }
    }, 1);
    await b.start();
    await a.start();
    try {
      await eventually(
        () => files.every(({ path, bytes }) => read(b.dir, path)?.equals(bytes)),
        'every file at b',
        60_000,
      );
      expect(most.up).toBeGreaterThan(1);
      expect(most.down).toBeGreaterThan(1);
    } finally {
      clearInterval(look);
      await a.stop();
      await b.stop();
    }
  }, 120_000);

  it('keeps both versions of a binary file changed on two devices apart, under the conflict name on both', async () => {
    const [a, b] = await twoDevices();
    put(a.dir, 'photo.bin', Buffer.concat([Buffer.from([0]), randomBytes(4096)]));
    await a.start();
    await b.start();
    try {
      await eventually(() => read(b.dir, 'photo.bin'), 'photo.bin at b', 30_000);
      await b.flush();
      await b.stop();
      const fromA = Buffer.concat([Buffer.from([0, 0xa]), randomBytes(8192)]);
      put(a.dir, 'photo.bin', fromA);
      await allSent(a, 'a sent its version');
      await stopWhenStored(a);
      // b changes it later, without having seen a's version.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const fromB = Buffer.concat([Buffer.from([0, 0xb]), randomBytes(8192)]);
      put(b.dir, 'photo.bin', fromB);
      await b.start();
      await a.start();
      const copies = (dir: string) =>
        readdirSync(dir).filter((name) => /^photo\.sync-conflict-\d{8}-\d{6}-.+\.bin$/.test(name));
      for (const device of [a, b]) {
        await eventually(
          () => {
            device.scan();
            return copies(device.dir).length === 1 && read(device.dir, 'photo.bin')?.equals(fromB);
          },
          `both versions at ${device.dir}`,
          30_000,
        );
      }
      // The most recent edit (b's) keeps the name; a's version is the copy, named by a.
      const [copy] = copies(a.dir);
      expect(copies(b.dir)).toEqual([copy]);
      expect(copy).toContain(`-${fixture.credentials[0]!.deviceId}.bin`);
      expect(read(a.dir, copy!)!.equals(fromA)).toBe(true);
      expect(read(b.dir, copy!)!.equals(fromA)).toBe(true);
      // Said as every conflict is, by a device that settled it.
      const line = `conflict: photo.bin from device ${fixture.credentials[0]!.deviceId} kept as ${copy}`;
      expect([...a.lines, ...b.lines]).toContain(line);
      expect(a.folder!.folderStatus().conflicts).toEqual([copy]);
      expect(b.folder!.folderStatus().conflicts).toEqual([copy]);
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 120_000);

  it('keeps files .syncignore matches off the host, binary ones included, on both sides', async () => {
    const [a, b] = await twoDevices();
    const rules = '*.log\nbuild/\n!.obsidian/\n';
    const marker = 'ignored-blob-marker-7f3a';
    const ignored = () => Buffer.concat([Buffer.from(`${marker}\0`), randomBytes(1_100_000)]);
    put(a.dir, '.syncignore', rules);
    put(b.dir, '.syncignore', rules);
    put(a.dir, 'trace.log', ignored());
    put(a.dir, 'build/app.bin', ignored());
    put(a.dir, '.cache/blob.bin', ignored());
    const settings = Buffer.concat([Buffer.from('obsidian\0'), randomBytes(2048)]);
    put(a.dir, '.obsidian/workspace.bin', settings);
    await a.start();
    await b.start();
    try {
      await eventually(() => read(b.dir, '.obsidian/workspace.bin'), '.obsidian at b', 30_000);
      expect(read(b.dir, '.obsidian/workspace.bin')!.equals(settings)).toBe(true);
      put(b.dir, 'b.log', ignored());
      put(b.dir, 'build/b.bin', ignored());
      put(b.dir, 'kept.bin', Buffer.from([0, 1, 2, 3]));
      b.scan();
      await eventually(() => read(a.dir, 'kept.bin'), 'kept.bin at a', 30_000);
      await allSent(a, 'a idle');
      await allSent(b, 'b idle');
      for (const [dir, paths] of [
        [b.dir, ['trace.log', 'build/app.bin', '.cache/blob.bin']],
        [a.dir, ['b.log', 'build/b.bin']],
      ] as const) {
        for (const path of paths) expect(read(dir, path), path).toBeUndefined();
      }
      const stored = storeFilesText(join(fixture.th.dir, 'data'));
      expect(exposes(stored, marker)).toBe(false);
      expect(exposes(stored, 'obsidian')).toBe(true); // the check can see what the host holds
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 120_000);

  it('sends about 1 MiB when 1 MiB changes in the middle of a 100 MiB file (bytes counted at the relay)', async () => {
    const [a] = await twoDevices();
    const file = join(a.dir, 'big.img');
    const fd = openSync(file, 'w');
    for (let i = 0; i < 100; i += 1) writeSync(fd, randomBytes(1_048_576));
    closeSync(fd);
    await a.start();
    try {
      await allSent(a, 'a sent big.img');
      const before = await chunkBytes();
      expect(before).toBeGreaterThan(100 * 1_048_576);
      const middle = openSync(file, 'r+');
      writeSync(middle, randomBytes(1_048_576), 0, 1_048_576, 50 * 1_048_576);
      closeSync(middle);
      a.scan();
      await allSent(a, 'a sent the change');
      await eventually(
        () => a.lines.filter((line) => line === 'sent big.img').length === 1,
        'the new version published',
      );
      const sent = (await chunkBytes()) - before;
      console.log(`1 MiB changed in a 100 MiB file: ${sent} bytes of new chunks on the host`);
      expect(sent).toBeGreaterThanOrEqual(1_048_576);
      expect(sent).toBeLessThan(1.6 * 1_048_576);
    } finally {
      await a.stop();
    }
  }, 180_000);

  it('puts the chunks of a file back at its next connection when the host no longer holds them', async () => {
    const [a, b] = await twoDevices();
    const binary = randomBytes(600_000);
    put(a.dir, 'kept.bin', binary);
    await a.start();
    await allSent(a, 'a sent kept.bin');
    await stopWhenStored(a);
    // What the host's sweep does to chunks nobody asked about past the history window.
    const db = new Database(join(fixture.th.dir, 'data', 'store.db'));
    try {
      expect(db.prepare('DELETE FROM chunks').run().changes).toBeGreaterThan(0);
    } finally {
      db.close();
    }
    await a.start();
    await eventually(
      () => a.lines.find((line) => line.startsWith('put kept.bin back on the host')),
      'a put kept.bin back',
      30_000,
    );
    await b.start();
    await eventually(() => read(b.dir, 'kept.bin'), 'kept.bin at b', 30_000);
    expect(read(b.dir, 'kept.bin')!.equals(binary)).toBe(true);
    await a.stop();
    await b.stop();
  }, 120_000);

  for (const passphrase of [undefined, 'blob passphrase']) {
    it(`never writes a chunk damaged on the host, and has it put back by the device that holds it${passphrase ? ' (encrypted)' : ''}`, async () => {
      const [a, b] = await twoDevices(passphrase);
      const binary = randomBytes(600_000);
      put(a.dir, 'data.bin', binary);
      await a.start();
      await allSent(a, 'a sent data.bin');
      await a.flush();
      const storePath = join(fixture.th.dir, 'data', 'store.db');
      try {
        // Damaged on the host's disk while a stays online: nobody repairs it by hand.
        // This project's: the host keeps the chunks of the file's earlier tests too.
        const victim = storedChunks(storePath, a.roomId)[0]!;
        const flipped = Buffer.from(victim.data);
        flipped[100] = flipped[100]! ^ 0xff;
        overwriteStoredChunk(storePath, victim.id, flipped);
        await b.start();
        await eventually(
          () => b.lines.find((line) => line.startsWith('not received data.bin')),
          `the damaged chunk found: ${JSON.stringify([a.lines, b.lines])}`,
          30_000,
        );
        expect(read(b.dir, 'data.bin')).toBeUndefined();
        await eventually(() => read(b.dir, 'data.bin'), 'data.bin at b', 30_000);
        expect(read(b.dir, 'data.bin')!.equals(binary)).toBe(true);
        expect(readdirSync(b.dir).filter((name) => name.includes('sync-host-tmp'))).toEqual([]);
        expect(a.lines).toContain('put data.bin back on the host (1 chunk(s) it no longer held)');
        const repaired = storedChunks(storePath, a.roomId).find((c) => c.id === victim.id)!.data;
        expect(repaired.equals(flipped)).toBe(false);
        // Unencrypted, the same bytes again; sealed, sealed again (another nonce).
        if (passphrase === undefined) expect(repaired.equals(victim.data)).toBe(true);
      } finally {
        await a.stop();
        await b.stop();
      }
    }, 120_000);
  }
  it('puts a chunk reported lost back at most once a minute', async () => {
    let skewMs = 0;
    const now = () => Date.now() + skewMs;
    const [a] = await devicesOf({ now, limits: { filesPerMinute: 1000, bytesPerMinute: 1 << 30 } });
    const binary = randomBytes(300_000);
    put(a.dir, 'lost.bin', binary);
    await a.start();
    await allSent(a, 'a sent lost.bin');
    const db = new Database(join(fixture.th.dir, 'data', 'store.db'));
    const ids = () =>
      db.prepare<[string], string>('SELECT id FROM chunks WHERE room = ?').pluck().all(a.roomId);
    const putBack = () => a.lines.filter((line) => line.startsWith('put lost.bin back')).length;
    try {
      const [first, second] = ids();
      // Gone from the host (as a chunk-bad drops it), told twice: put back once.
      const remove = db.prepare('DELETE FROM chunks WHERE room = ? AND id = ?');
      remove.run(a.roomId, first);
      await a.folder!.chunksLost([first!]);
      expect(ids()).toContain(first);
      remove.run(a.roomId, first);
      await a.folder!.chunksLost([first!, first!]);
      expect(ids()).not.toContain(first);
      expect(putBack()).toBe(1);
      // Another id is taken up at once (the file's upload puts back every chunk the host lacks).
      remove.run(a.roomId, second);
      await a.folder!.chunksLost([first!, second!]);
      expect(ids()).toEqual(expect.arrayContaining([first, second]));
      expect(putBack()).toBe(2);
      // A minute later the first is taken up again.
      skewMs = 61_000;
      remove.run(a.roomId, first);
      await a.folder!.chunksLost([first!]);
      expect(ids()).toContain(first);
      expect(putBack()).toBe(3);
    } finally {
      db.close();
      await a.stop();
    }
  }, 60_000);
});
