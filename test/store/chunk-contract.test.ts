import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chunkBytes, type NewChunk } from '../../server/store/chunk-store.ts';
import type { DocumentStore, StoreBounds } from '../../server/store/document-store.ts';
import { dayMs, history, implementations, type StoreFactory } from '../helpers/store-factories.ts';

/**
 * One suite of what the relay may count on from the chunk store, run against every store
 * (store.db on both SQLite engines, the cluster's PostgreSQL one): chunks kept per room, key check
 * value and id, counted against the bounds with the documents, gone with their room or user,
 * dropped when unused past the history window, and the folder reports.
 */

const room1 = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const room1b = '1.00000000000000000000000000000002.00000000000000000000000000000002';
const room2 = '2.00000000000000000000000000000003.00000000000000000000000000000003';

const idOf = (data: Buffer) => `s${createHash('sha256').update(data).digest('base64url')}`;

function chunk(data: Buffer, extra: Partial<NewChunk> = {}): NewChunk {
  return { room: room1, kc: '', id: idOf(data), data, ...extra };
}

for (const [name, factoryOf, prepare, skip] of implementations) {
  const title = skip
    ? `chunk store contract: ${name}: skipped, ${skip}`
    : `chunk store contract: ${name}`;
  describe.skipIf(skip !== undefined)(title, () => {
    let factory: StoreFactory;
    let at = Date.UTC(2026, 0, 5, 12, 0, 0);
    const now = () => at;

    beforeAll(prepare);
    afterEach(async () => {
      await factory.dispose();
    });

    async function fresh(bounds?: StoreBounds): Promise<DocumentStore> {
      factory = factoryOf();
      at = Date.UTC(2026, 0, 5, 12, 0, 0);
      return factory.make({ bounds, now });
    }

    it('keeps chunks per room and key check value, gives their bytes back exactly, across a reopen', async () => {
      let store = await fresh();
      const data = randomBytes(5000);
      const plain = chunk(data);
      expect(await store.chunks.put(plain)).toEqual({ stored: true, already: false });
      expect(await store.chunks.put(plain)).toEqual({ stored: true, already: true });
      const sealed = chunk(Buffer.from([0, 255, 0]), { kc: 'kc1', id: plain.id });
      expect(await store.chunks.put(sealed)).toEqual({ stored: true, already: false });
      // Puts of one turn together, the same chunk twice among them.
      const twice = chunk(randomBytes(10));
      const outcomes = await Promise.all([store.chunks.put(twice), store.chunks.put(twice)]);
      expect(outcomes).toEqual([
        { stored: true, already: false },
        { stored: true, already: true },
      ]);
      expect(store.bytes()).toBe(chunkBytes(plain) + chunkBytes(sealed) + chunkBytes(twice));

      store = await factory.reopen({ now });
      expect(store.bytes()).toBe(chunkBytes(plain) + chunkBytes(sealed) + chunkBytes(twice));
      expect(store.chunks.bytes()).toBe(store.bytes());
      expect((await store.chunks.get(room1, '', plain.id))?.equals(data)).toBe(true);
      expect((await store.chunks.get(room1, 'kc1', plain.id))?.equals(sealed.data)).toBe(true);
      expect(await store.chunks.get(room1, 'kc2', plain.id)).toBeUndefined();
      expect(await store.chunks.get(room1b, '', plain.id)).toBeUndefined();
      const absent = idOf(Buffer.from('absent'));
      expect(await store.chunks.have(room1, '', [absent, twice.id, plain.id])).toEqual([
        twice.id,
        plain.id,
      ]);
      expect(await store.chunks.have(room1, 'kc1', [twice.id, plain.id])).toEqual([plain.id]);
      expect(await store.chunks.have(room1, '', [])).toEqual([]);
    });

    it('counts chunks and documents against the same bounds, and refuses what would pass them', async () => {
      const data = randomBytes(1000);
      const size = chunkBytes(chunk(data));
      const store = await fresh({ userMaxBytes: 2 * size, maxBytes: 3 * size });
      expect(await store.chunks.put(chunk(data))).toMatchObject({ stored: true });
      expect(await store.chunks.put(chunk(randomBytes(1000)))).toMatchObject({ stored: true });
      expect(await store.chunks.put(chunk(randomBytes(1000)))).toEqual({ full: 'user' });
      // Held already: nothing counted, not refused.
      expect(await store.chunks.put(chunk(data))).toEqual({ stored: true, already: true });
      const entry = { room: room1, doc: 'd', device: '1', data: Buffer.from('x') };
      expect(await store.append(entry)).toEqual({ full: 'user' });
      expect(await store.chunks.put(chunk(randomBytes(1000), { room: room2 }))).toMatchObject({
        stored: true,
      });
      expect(await store.chunks.put(chunk(randomBytes(1000), { room: room2 }))).toEqual({
        full: 'store',
      });
      expect(store.bytes()).toBe(3 * size);
    });

    it('removes the chunks and folder reports of a deleted room or user, and lists them in usage', async () => {
      const store = await fresh();
      const a = chunk(randomBytes(100));
      const b = chunk(randomBytes(200), { room: room1b });
      const c = chunk(randomBytes(300), { room: room2 });
      for (const one of [a, b, c]) await store.chunks.put(one);
      await store.append({ room: room1, doc: 'd', device: '1', data: Buffer.from('x') });
      const report = { doc: 'folder', device: '1', files: 3, bytes: 600, at };
      await store.chunks.report({ ...report, room: room1, encrypted: false, names: ['a', 'b/c'] });
      await store.chunks.report({ ...report, room: room1b, encrypted: true, names: ['secret'] });
      await store.chunks.report({ ...report, room: room1b, files: 4, encrypted: true });
      const usage = await store.usage();
      expect(usage.bytes).toBe(chunkBytes(a) + chunkBytes(b) + chunkBytes(c) + 1 + 64 + 1);
      expect(usage.rooms).toEqual([
        {
          room: room1,
          user: '1',
          documents: 1,
          bytes: chunkBytes(a) + 1 + 64 + 1,
          chunks: 1,
          chunkBytes: chunkBytes(a),
          folders: [{ ...report, encrypted: false, names: ['a', 'b/c'] }],
        },
        {
          room: room1b,
          user: '1',
          documents: 0,
          bytes: chunkBytes(b),
          chunks: 1,
          chunkBytes: chunkBytes(b),
          folders: [{ ...report, files: 4, encrypted: true }],
        },
        {
          room: room2,
          user: '2',
          documents: 0,
          bytes: chunkBytes(c),
          chunks: 1,
          chunkBytes: chunkBytes(c),
          folders: [],
        },
      ]);
      expect((await store.rooms()).sort()).toEqual([room1, room1b, room2]);
      await store.deleteRoom(room1b);
      expect(await store.chunks.get(room1b, '', b.id)).toBeUndefined();
      expect((await store.rooms()).sort()).toEqual([room1, room2]);
      await store.deleteUser('1');
      expect(await store.chunks.get(room1, '', a.id)).toBeUndefined();
      expect(await store.rooms()).toEqual([room2]);
      expect(store.bytes()).toBe(chunkBytes(c));
      expect((await store.usage()).rooms.map((r) => r.room)).toEqual([room2]);
    });

    it('drops a damaged chunk only while it holds the bytes found damaged, and counts its bytes no more', async () => {
      let store = await fresh();
      const kept = chunk(randomBytes(300));
      const damaged = chunk(randomBytes(400));
      const sealed = chunk(randomBytes(500), { kc: 'kc1', id: damaged.id });
      for (const one of [kept, damaged, sealed]) await store.chunks.put(one);
      await store.append({ room: room1, doc: 'd', device: '1', data: Buffer.from('x') });
      const documentBytes = 1 + 64 + 1;
      // Other bytes than the row holds: nothing is dropped.
      expect(await store.chunks.drop(room1, '', damaged.id, randomBytes(400))).toBe(false);
      expect(await store.chunks.drop(room1, '', damaged.id, damaged.data)).toBe(true);
      expect(await store.chunks.drop(room1, '', damaged.id, damaged.data)).toBe(false);
      expect(await store.chunks.drop(room2, '', kept.id)).toBe(false);
      expect(await store.chunks.have(room1, '', [kept.id, damaged.id])).toEqual([kept.id]);
      // The same id under another key check value is another chunk.
      expect(await store.chunks.have(room1, 'kc1', [damaged.id])).toEqual([damaged.id]);
      const left = chunkBytes(kept) + chunkBytes(sealed);
      expect(store.chunks.bytes()).toBe(left);
      expect(store.bytes()).toBe(left + documentBytes);
      expect((await store.usage()).rooms[0]).toMatchObject({ chunks: 2, chunkBytes: left });
      expect(await store.chunks.drop(room1, 'kc1', sealed.id)).toBe(true);
      expect(store.bytes()).toBe(chunkBytes(kept) + documentBytes);
      // Put again: stored anew and counted once more.
      expect(await store.chunks.put(damaged)).toEqual({ stored: true, already: false });
      store = await factory.reopen({ now });
      expect(store.bytes()).toBe(chunkBytes(kept) + chunkBytes(damaged) + documentBytes);
      expect((await store.chunks.get(room1, '', damaged.id))?.equals(damaged.data)).toBe(true);
    });

    it('drops the chunks unused for longer than the history window and a day, keeps those asked about', async () => {
      const store = await fresh();
      const old = chunk(randomBytes(100));
      const touched = chunk(randomBytes(100));
      const again = chunk(randomBytes(100));
      for (const one of [old, touched, again]) await store.chunks.put(one);
      at += history.keepMs;
      await store.chunks.have(room1, '', [touched.id]);
      await store.chunks.put(again);
      at += dayMs + 1;
      expect(await store.compact(at)).toMatchObject({ chunks: 1 });
      const ids = [old.id, touched.id, again.id];
      expect(await store.chunks.have(room1, '', ids)).toEqual([touched.id, again.id]);
      expect(store.bytes()).toBe(chunkBytes(touched) + chunkBytes(again));
      expect(await store.compact(at)).not.toHaveProperty('chunks');
    });
  });
}
