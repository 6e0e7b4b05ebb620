import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { maxReportBytes, maxReportsPerRoom, reportBytes } from '../../protocol/relay-frames.ts';
import { chunkBytes, type FolderReport, type NewChunk } from '../../server/store/chunk-store.ts';
import type { DocumentStore, StoreBounds } from '../../server/store/document-store.ts';
import { dayMs, history, implementations, type StoreFactory } from '../helpers/store-factories.ts';

/**
 * One suite of what the relay may count on from the chunk store, run against every store
 * (store.db on both SQLite engines, the cluster's PostgreSQL one): chunks kept per room, key check
 * value and id, counted against the bounds with the documents, gone with their room or user,
 * dropped when unused past the history window, and the folder reports (counted with them, one
 * per room and folder document, bounded in size and number).
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
      const plainReport = reportBytes({ ...report, names: ['a', 'b/c'] });
      const sealedReport = reportBytes(report);
      expect(await store.chunks.reportNames(room1, 'folder')).toEqual(['a', 'b/c']);
      expect(await store.chunks.reportNames(room1b, 'folder')).toBeUndefined();
      const usage = await store.usage();
      const documentBytes = 1 + 64 + 1;
      expect(usage.bytes).toBe(
        chunkBytes(a) + chunkBytes(b) + chunkBytes(c) + documentBytes + plainReport + sealedReport,
      );
      expect(store.bytes()).toBe(usage.bytes);
      expect(usage.rooms).toEqual([
        {
          room: room1,
          user: '1',
          documents: 1,
          bytes: chunkBytes(a) + documentBytes + plainReport,
          chunks: 1,
          chunkBytes: chunkBytes(a),
          reportBytes: plainReport,
          folders: [{ ...report, encrypted: false, named: 2 }],
        },
        {
          room: room1b,
          user: '1',
          documents: 0,
          bytes: chunkBytes(b) + sealedReport,
          chunks: 1,
          chunkBytes: chunkBytes(b),
          reportBytes: sealedReport,
          folders: [{ ...report, files: 4, encrypted: true, named: 0 }],
        },
        {
          room: room2,
          user: '2',
          documents: 0,
          bytes: chunkBytes(c),
          chunks: 1,
          chunkBytes: chunkBytes(c),
          reportBytes: 0,
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

    it('counts folder reports against the bounds, one per folder, bounded in size and number', async () => {
      const report = (extra: Partial<FolderReport> = {}): FolderReport => ({
        room: room1,
        doc: 'folder',
        device: '7',
        files: 2,
        bytes: 10,
        encrypted: false,
        names: ['a.txt', 'b.txt'],
        at,
        ...extra,
      });
      const names = (n: number) => Array.from({ length: n }, (_, i) => `photos/${i}.jpg`);
      const big = report({ names: names(40) });
      const bound = reportBytes(big) + reportBytes(report({ doc: 'other' })) + 10;
      let store = await fresh({ userMaxBytes: bound, maxBytes: bound + 20 });
      expect(await store.chunks.report(report())).toEqual({ stored: true });
      expect(store.bytes()).toBe(reportBytes(report()));
      // The same folder again replaces its report: only the difference is counted.
      expect(await store.chunks.report(big)).toEqual({ stored: true });
      expect(store.bytes()).toBe(reportBytes(big));
      expect(await store.chunks.report(report({ doc: 'other' }))).toEqual({ stored: true });
      const full = reportBytes(big) + reportBytes(report({ doc: 'other' }));
      // Past the user's bound: refused, nothing changes; a smaller report goes in at the bound.
      expect(await store.chunks.report(report({ doc: 'third' }))).toEqual({ full: 'user' });
      expect(await store.chunks.report(report({ doc: 'other', names: names(41) }))).toEqual({
        full: 'user',
      });
      expect(store.bytes()).toBe(full);
      expect(await store.chunks.reportNames(room1, 'other')).toEqual(['a.txt', 'b.txt']);
      expect(await store.chunks.report(report({ names: ['x'] }))).toEqual({ stored: true });
      const smaller = reportBytes(report({ names: ['x'] })) + reportBytes(report({ doc: 'other' }));
      expect(store.bytes()).toBe(smaller);
      // The whole store's bound, from another user.
      const other = report({ room: room2, names: names(40) });
      expect(smaller + reportBytes(other)).toBeGreaterThan(bound + 20);
      expect(await store.chunks.report(other)).toEqual({ full: 'store' });
      expect(store.bytes()).toBe(smaller);
      // Over the size of one report, whatever the bounds.
      const tooLarge = report({ room: room2, names: Array(70).fill('n'.repeat(4000)) });
      expect(reportBytes(tooLarge)).toBeGreaterThan(maxReportBytes);
      expect(await store.chunks.report(tooLarge)).toEqual({ full: 'size' });
      // Folders of one room: at most maxReportsPerRoom; a known one is still replaced.
      store = await factory.reopen({ now, bounds: { userMaxBytes: 1e9, maxBytes: 1e10 } });
      expect(store.bytes()).toBe(smaller);
      for (let i = 2; i < maxReportsPerRoom; i++) {
        expect(await store.chunks.report(report({ doc: `f${i}` }))).toEqual({ stored: true });
      }
      expect(await store.chunks.report(report({ doc: 'one too many' }))).toEqual({
        full: 'reports',
      });
      expect(await store.chunks.report(report({ doc: 'f2', files: 9 }))).toEqual({ stored: true });
      const usage = await store.usage();
      expect(usage.rooms[0]?.folders).toHaveLength(maxReportsPerRoom);
      expect(usage.bytes).toBe(store.bytes());
      await store.deleteRoom(room1);
      expect(store.bytes()).toBe(0);
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
