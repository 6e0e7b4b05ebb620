import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { userOfRoom } from '../../protocol/room-id.ts';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import { chunkBytes, type NewChunk } from '../../server/store/chunk-store.ts';
import type { DocumentStore } from '../../server/store/document-store.ts';
import { openSqliteStore } from '../../server/store/sqlite-store.ts';
import { dayMs, history } from '../helpers/store-factories.ts';

/**
 * store.db keeps each chunk's bytes in a file under `chunks/` beside it, the row naming the file;
 * rows written before that hold their bytes and are still read. Files go with their rows, a file
 * no row names is removed at open, and a row whose file is lost is a missing chunk.
 */

const room1 = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const room2 = '2.00000000000000000000000000000002.00000000000000000000000000000002';
const bounds = { userMaxBytes: 1 << 30, maxBytes: 1 << 30 };
const idOf = (data: Buffer) => `s${createHash('sha256').update(data).digest('base64url')}`;
const chunkOf = (data: Buffer, room = room1): NewChunk => ({ room, kc: '', id: idOf(data), data });

interface Row {
  id: string;
  file: number | null;
  data: Buffer;
}

for (const engine of ['native', 'wasm'] as const) {
  describe(`store.db chunk files (${engine === 'native' ? 'better-sqlite3' : 'sql.js'})`, () => {
    let dir = '';
    let store: DocumentStore | undefined;
    let at = Date.UTC(2026, 0, 5, 12, 0, 0);
    const path = () => join(dir, 'store.db');
    const folder = () => join(dir, 'chunks');

    beforeAll(() => chooseSqliteEngine(engine, createLogger('silent')));
    afterEach(async () => {
      await store?.close();
      store = undefined;
      rmSync(dir, { recursive: true, force: true });
    });

    function open(): DocumentStore {
      store = openSqliteStore({ path: path(), bounds, history, now: () => at });
      return store;
    }

    function fresh(): DocumentStore {
      dir = mkdtempSync(join(tmpdir(), 'chunk-files-'));
      at = Date.UTC(2026, 0, 5, 12, 0, 0);
      return open();
    }

    /** The store closed, its rows as SQLite holds them. */
    async function rows(): Promise<Row[]> {
      await store?.close();
      store = undefined;
      const db = new Database(path(), { readonly: true });
      const found = db.prepare<[], Row>('SELECT id, file, data FROM chunks ORDER BY id').all();
      db.close();
      return found;
    }

    /** The files under chunks/, as paths relative to it. */
    const files = () =>
      readdirSync(folder(), { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => relative(folder(), join(entry.parentPath, entry.name)))
        .sort();

    /**
     * A fresh store with two chunks (and `others`) put, then the first one's file removed and
     * the second's cut short, as a power loss may leave them.
     */
    async function damaged(others: NewChunk[] = []) {
      const opened = fresh();
      const gone = chunkOf(randomBytes(3000));
      const short = chunkOf(randomBytes(3000));
      for (const chunk of [gone, short, ...others]) await opened.chunks.put(chunk);
      const [goneFile, shortFile] = files();
      unlinkSync(join(folder(), goneFile as string));
      writeFileSync(join(folder(), shortFile as string), short.data.subarray(0, 100));
      return { opened, gone, short };
    }

    it("keeps a put's bytes in a file under chunks/, not in its row, and reads them back after a reopen", async () => {
      let opened = fresh();
      const data = randomBytes(262_144);
      expect(await opened.chunks.put(chunkOf(data))).toEqual({ stored: true, already: false });
      expect((await opened.chunks.get(room1, '', idOf(data)))?.equals(data)).toBe(true);
      const [row] = await rows();
      expect(row?.data.length).toBe(0);
      expect(row?.file).toEqual(expect.any(Number));
      expect(files()).toEqual([join('0', String(row?.file))]);
      expect(readFileSync(join(folder(), '0', String(row?.file))).equals(data)).toBe(true);
      // The host's alone, as the data folder's other files.
      const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
      expect(mode(join(folder(), '0', String(row?.file)))).toBe('600');
      expect([mode(folder()), mode(join(folder(), '0'))]).toEqual(['700', '700']);

      opened = open();
      expect((await opened.chunks.get(room1, '', idOf(data)))?.equals(data)).toBe(true);
      expect(opened.chunks.bytes()).toBe(chunkBytes(chunkOf(data)));
      // Numbers go on from the highest a row names, never reusing one.
      const more = randomBytes(100);
      await opened.chunks.put(chunkOf(more));
      const numbers = (await rows()).map((r) => r.file);
      expect(new Set(numbers).size).toBe(2);
    });

    it('reads a row that holds its bytes, as the versions before chunk files wrote it', async () => {
      fresh();
      const data = randomBytes(5000);
      const chunk = chunkOf(data);
      await store?.close();
      const db = new Database(path());
      db.prepare(
        'INSERT INTO chunks (room, kc, id, user, size, bytes, storedAt, usedAt, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(room1, '', chunk.id, '1', data.length, chunkBytes(chunk), at, at, data);
      db.close();

      const opened = open();
      expect(opened.chunks.bytes()).toBe(chunkBytes(chunk));
      expect((await opened.chunks.get(room1, '', chunk.id))?.equals(data)).toBe(true);
      expect(await opened.chunks.drop(room1, '', chunk.id, data)).toBe(true);
      expect(opened.chunks.bytes()).toBe(0);
    });

    it('removes the files of the chunks dropped, of a deleted room and user, and of the unused', async () => {
      const opened = fresh();
      const put = async (room = room1) => {
        const chunk = chunkOf(randomBytes(3000), room);
        await opened.chunks.put(chunk);
        return chunk;
      };
      const dropped = await put();
      const droppedIfSame = await put();
      expect(await opened.chunks.drop(room1, '', droppedIfSame.id, randomBytes(3000))).toBe(false);
      expect(files()).toHaveLength(2);
      expect(await opened.chunks.drop(room1, '', dropped.id)).toBe(true);
      expect(await opened.chunks.drop(room1, '', droppedIfSame.id, droppedIfSame.data)).toBe(true);
      expect(files()).toEqual([]);

      await put(room1);
      await put(room2);
      await opened.deleteRoom(room1);
      expect(files()).toHaveLength(1);
      await opened.deleteUser('2');
      expect(files()).toEqual([]);

      const unused = await put();
      at += 10 * dayMs;
      const used = await put();
      await opened.compact(at + history.keepMs);
      expect(await opened.chunks.have(room1, '', [unused.id, used.id])).toEqual([used.id]);
      expect(files()).toHaveLength(1);
      expect(opened.chunks.bytes()).toBe(chunkBytes(used));
    });

    it('removes at open the numbered files no row names, keeps those rows name and anything else', async () => {
      const opened = fresh();
      const data = randomBytes(4000);
      await opened.chunks.put(chunkOf(data));
      await opened.close();
      const [kept] = files();
      // As a crash between a file's write and its row's commit leaves them, in and out of place.
      writeFileSync(join(folder(), '0', '7'), randomBytes(10));
      mkdirSync(join(folder(), '3'));
      writeFileSync(join(folder(), '3', '0'), randomBytes(10));
      writeFileSync(join(folder(), '0', 'notes.txt'), 'not a chunk');
      mkdirSync(join(folder(), 'lost+found'));
      writeFileSync(join(folder(), 'lost+found', '12'), 'not ours');

      const reopened = open();
      expect(files()).toEqual([join('0', 'notes.txt'), kept, join('lost+found', '12')].sort());
      expect((await reopened.chunks.get(room1, '', idOf(data)))?.equals(data)).toBe(true);
    });

    it('answers a chunk whose file is gone or cut short as missing, and forgets its row and bytes', async () => {
      const { opened, gone, short } = await damaged();

      expect(await opened.chunks.get(room1, '', gone.id)).toBeUndefined();
      expect(opened.chunks.bytes()).toBe(chunkBytes(short));
      expect(opened.bytes()).toBe(chunkBytes(short));
      expect(await opened.chunks.get(room1, '', short.id)).toBeUndefined();
      expect(opened.chunks.bytes()).toBe(0);
      expect(await opened.chunks.have(room1, '', [gone.id, short.id])).toEqual([]);
      expect(files()).toEqual([]);
      // A device puts it back.
      expect(await opened.chunks.put(gone)).toEqual({ stored: true, already: false });
      expect((await opened.chunks.get(room1, '', gone.id))?.equals(gone.data)).toBe(true);
      expect((await rows()).map((row) => row.id)).toEqual([gone.id]);
    });

    it('answers have without a chunk whose file is gone or cut short, so that it is put again', async () => {
      const kept = chunkOf(randomBytes(3000));
      const { opened, gone, short } = await damaged([kept]);

      const ids = [gone.id, short.id, kept.id];
      expect(await opened.chunks.have(room1, '', ids)).toEqual([kept.id]);
      expect(opened.chunks.bytes()).toBe(chunkBytes(kept));
      expect(files()).toHaveLength(1);
      // The device that asked puts them again: stored, not taken for copies already there.
      expect(await opened.chunks.put(gone)).toEqual({ stored: true, already: false });
      expect(await opened.chunks.put(short)).toEqual({ stored: true, already: false });
      expect((await opened.chunks.have(room1, '', ids)).sort()).toEqual([...ids].sort());
      expect((await opened.chunks.get(room1, '', short.id))?.equals(short.data)).toBe(true);
    });

    it('stores again a put of a chunk whose file is gone or cut short, instead of taking it as held', async () => {
      const { opened, gone, short } = await damaged();

      expect(await opened.chunks.put(gone)).toEqual({ stored: true, already: false });
      expect(await opened.chunks.put(short)).toEqual({ stored: true, already: false });
      expect(await opened.chunks.put(short)).toEqual({ stored: true, already: true });
      expect(opened.chunks.bytes()).toBe(chunkBytes(gone) + chunkBytes(short));
      expect(opened.bytes()).toBe(chunkBytes(gone) + chunkBytes(short));
      expect((await opened.chunks.get(room1, '', gone.id))?.equals(gone.data)).toBe(true);
      expect((await opened.chunks.get(room1, '', short.id))?.equals(short.data)).toBe(true);
      // the two new files alone: the short one was removed with its row
      expect(files()).toHaveLength(2);
      expect((await rows()).map((row) => row.file)).not.toContain(null);
    });

    for (const deleted of ['room', 'user'] as const) {
      it(`refuses a put whose file was still being written when its ${deleted} was deleted, leaving no row nor file`, async () => {
        const opened = fresh();
        const late = chunkOf(randomBytes(3000));
        const put = opened.chunks.put(late);
        if (deleted === 'room') await opened.deleteRoom(room1);
        else await opened.deleteUser(userOfRoom(room1));
        await expect(put).rejects.toThrow(/deleted/);
        expect(files()).toEqual([]);
        expect(opened.chunks.bytes()).toBe(0);
        expect(await opened.chunks.have(room1, '', [late.id])).toEqual([]);
        expect(await rows()).toEqual([]);
      });
    }

    it('writes one file for puts of one chunk at once, the first answered as stored, the others as held', async () => {
      const opened = fresh();
      const chunk = chunkOf(randomBytes(3000));
      const outcomes = await Promise.all([1, 2, 3].map(() => opened.chunks.put(chunk)));
      expect(outcomes).toEqual([
        { stored: true, already: false },
        { stored: true, already: true },
        { stored: true, already: true },
      ]);
      await opened.chunks.put(chunkOf(randomBytes(3000)));
      // One file number given for the three puts: the next chunk's file is number 1.
      expect(files()).toEqual(['0/0', '0/1']);
      expect(opened.chunks.bytes()).toBe(2 * chunkBytes(chunk));
    });

    it('lets a put whose file is being written finish before the store closes, and refuses puts after', async () => {
      const opened = fresh();
      const chunk = chunkOf(randomBytes(3000));
      const put = opened.chunks.put(chunk);
      await opened.close();
      expect(await put).toEqual({ stored: true, already: false });
      await expect(opened.chunks.put(chunkOf(randomBytes(3000)))).rejects.toThrow(/closed/);
      const reopened = open();
      expect((await reopened.chunks.get(room1, '', chunk.id))?.equals(chunk.data)).toBe(true);
      expect(files()).toEqual(['0/0']);
    });

    it('refuses a put whose file cannot be written, alone, leaving no row nor file of it', async () => {
      const opened = fresh();
      // The second put's file (number 1) cannot be written: a folder is in its place.
      mkdirSync(join(folder(), '0', '1'), { recursive: true });
      const first = chunkOf(randomBytes(3000));
      const second = chunkOf(randomBytes(3000));
      const outcomes = await Promise.allSettled([
        opened.chunks.put(first),
        opened.chunks.put(second),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected']);
      expect(opened.chunks.bytes()).toBe(chunkBytes(first));
      expect(opened.bytes()).toBe(chunkBytes(first));
      expect(files()).toEqual(['0/0']);
      expect(existsSync(join(folder(), '0', '1'))).toBe(true);
      expect(await opened.chunks.put(second)).toEqual({ stored: true, already: false });
      expect((await opened.chunks.get(room1, '', second.id))?.equals(second.data)).toBe(true);
      expect((await rows()).map((row) => row.id).sort()).toEqual([first.id, second.id].sort());
    });
  });
}
