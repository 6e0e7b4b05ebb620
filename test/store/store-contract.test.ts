import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DocumentStore, NewEntry, StoreBounds } from '../../server/store/document-store.ts';
import {
  history,
  implementations,
  minuteMs,
  type StoreFactory,
} from '../helpers/store-factories.ts';

/**
 * One suite of what the relay may count on from a document store, run against every store: the
 * single-node one in SQLite, on both SQLite engines (better-sqlite3, and sql.js as when the
 * addon cannot load), and the cluster one in PostgreSQL (a fresh database per test, dropped
 * after; skipped with the reason when PostgreSQL cannot be reached).
 */

const room1 = '1.00000000000000000000000000000001.00000000000000000000000000000001';
const room1b = '1.00000000000000000000000000000002.00000000000000000000000000000002';
const room2 = '2.00000000000000000000000000000003.00000000000000000000000000000003';

const entry = (text: string, extra: Partial<NewEntry> = {}): NewEntry => ({
  room: room1,
  doc: 'notes.md',
  device: '7',
  data: Buffer.from(text),
  ...extra,
});

/** A room's usage without chunks nor folder reports. */
const noChunks = { chunks: 0, chunkBytes: 0, reportBytes: 0, folders: [] };

const texts = (entries: Array<{ data: Buffer }>) => entries.map((e) => e.data.toString());

for (const [name, factoryOf, prepare, skip] of implementations) {
  const title = skip
    ? `document store contract: ${name}: skipped, ${skip}`
    : `document store contract: ${name}`;
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

    async function positions(store: DocumentStore, entries: NewEntry[]): Promise<number[]> {
      const outcomes = await Promise.all(entries.map((e) => store.append(e)));
      return outcomes.map((o) => ('pos' in o ? o.pos : -1));
    }

    it('gives each document positions 1, 2, 3 in the order of the appends, and reads them back in order', async () => {
      const store = await fresh();
      expect(await positions(store, [entry('a'), entry('b'), entry('c')])).toEqual([1, 2, 3]);
      expect(await positions(store, [entry('x', { doc: 'other.md' })])).toEqual([1]);
      expect(await positions(store, [entry('y', { room: room1b })])).toEqual([1]);
      const page = await store.read(room1, 'notes.md', 0, 1 << 20);
      expect(texts(page.entries)).toEqual(['a', 'b', 'c']);
      expect(page.entries.map((e) => e.pos)).toEqual([1, 2, 3]);
      expect(page.lastPos).toBe(3);
      expect(page.entries[0]).toMatchObject({ device: '7', at });
      expect(texts((await store.read(room1, 'notes.md', 2, 1 << 20)).entries)).toEqual(['c']);
      expect(await store.read(room1, 'missing.md', 0, 1 << 20)).toEqual({
        entries: [],
        lastPos: 0,
      });
    });

    it('keeps the key check value, covers and pieces of an entry, and its bytes exactly', async () => {
      const store = await fresh();
      const bytes = Buffer.from([0, 255, 1, 254, 10, 13]);
      await store.append({
        ...entry(''),
        data: bytes,
        kc: 'kc1',
        covers: 0,
        part: { m: 'm1', i: 0, n: 2 },
      });
      const [kept] = (await store.read(room1, 'notes.md', 0, 1 << 20)).entries;
      expect(kept).toEqual({
        pos: 1,
        at,
        device: '7',
        data: bytes,
        kc: 'kc1',
        covers: 0,
        part: { m: 'm1', i: 0, n: 2 },
      });
    });

    it('reads in pages of about maxBytes, at least one entry each', async () => {
      const store = await fresh();
      await positions(store, [entry('x'.repeat(100)), entry('y'.repeat(100)), entry('z')]);
      const first = await store.read(room1, 'notes.md', 0, 150);
      expect(first.entries.map((e) => e.pos)).toEqual([1]);
      const tiny = await store.read(room1, 'notes.md', 1, 1);
      expect(tiny.entries.map((e) => e.pos)).toEqual([2]);
    });

    it('keeps everything across a restart, and positions go on from where they were', async () => {
      const store = await fresh();
      await positions(store, [entry('a'), entry('b')]);
      const bytes = store.bytes();
      expect(bytes).toBeGreaterThan(0);
      const again = await factory.reopen({ now });
      expect(again.bytes()).toBe(bytes);
      expect(texts((await again.read(room1, 'notes.md', 0, 1 << 20)).entries)).toEqual(['a', 'b']);
      expect(await positions(again, [entry('c')])).toEqual([3]);
    });

    it('refuses an append past the user bound or the store bound, storing nothing of it', async () => {
      const one = entry('x'.repeat(100));
      const size = 100 + 64 + 1;
      const store = await fresh({ userMaxBytes: 2 * size, maxBytes: 3 * size });
      expect(await store.append(one)).toEqual({ pos: 1 });
      expect(await store.append(one)).toEqual({ pos: 2 });
      expect(await store.append(one)).toEqual({ full: 'user' });
      expect(await store.append({ ...one, room: room2 })).toEqual({ pos: 1 });
      expect(await store.append({ ...one, room: room2 })).toEqual({ full: 'store' });
      expect(store.bytes()).toBe(3 * size);
      expect((await store.read(room1, 'notes.md', 0, 1 << 20)).lastPos).toBe(2);
    });

    it('finds the newest snapshot of the requester kc covering past `after`, whole pieces only', async () => {
      const store = await fresh();
      await positions(store, [
        entry('e1', { kc: 'A' }),
        entry('e2', { kc: 'A' }),
        entry('snapA', { kc: 'A', covers: 2 }),
        entry('snapB', { kc: 'B', covers: 3 }),
        entry('plain', { covers: 1 }),
        entry('bogus', { kc: 'A', covers: 99 }),
        entry('p0', { kc: 'A', covers: 4, part: { m: 'big', i: 0, n: 2 } }),
      ]);
      const snapshotOf = async (kc: string | undefined, after: number) =>
        texts(await store.newestSnapshot(room1, 'notes.md', kc, after));
      // The pieced one is not whole yet; the one covering its own position never counts.
      expect(await snapshotOf('A', 0)).toEqual(['snapA']);
      expect(await snapshotOf('A', 2)).toEqual([]);
      expect(await snapshotOf('B', 0)).toEqual(['snapB']);
      expect(await snapshotOf(undefined, 0)).toEqual(['plain']);
      expect(await snapshotOf('C', 0)).toEqual([]);
      await positions(store, [entry('p1', { kc: 'A', covers: 4, part: { m: 'big', i: 1, n: 2 } })]);
      expect(await snapshotOf('A', 2)).toEqual(['p0', 'p1']);
    });

    it("names the distinct key check values of a room's entries, of every document, in byte order", async () => {
      const store = await fresh();
      expect(await store.keyChecks(room1)).toEqual([]);
      await positions(store, [
        entry('plain'),
        ...['kcB', 'kca', 'kcB', 'kca', 'kcB'].map((kc, i) => entry(`e${i}`, { kc })),
        entry('snap', { kc: 'kca', covers: 3 }),
        entry('other doc', { doc: 'sync-host-passphrase', kc: 'kcA' }),
        entry('other room', { room: room1b, kc: 'kcZ' }),
      ]);
      // Not encrypted: named by none; another room's are not this one's.
      expect(await store.keyChecks(room1)).toEqual(['kcA', 'kcB', 'kca']);
      expect(await store.keyChecks(room1b)).toEqual(['kcZ']);
      expect(await store.keyChecks(room2)).toEqual([]);
      const again = await factory.reopen({ now });
      expect(await again.keyChecks(room1)).toEqual(['kcA', 'kcB', 'kca']);
      await again.deleteRoom(room1);
      expect(await again.keyChecks(room1)).toEqual([]);
      expect(await again.keyChecks(room1b)).toEqual(['kcZ']);
    });

    it('reports bytes per room and user, and deleting a room or a user removes its documents', async () => {
      const store = await fresh();
      await positions(store, [
        entry('a'),
        entry('b', { doc: 'two.md' }),
        entry('c', { room: room1b }),
        entry('d', { room: room2 }),
      ]);
      const usage = await store.usage();
      expect(usage.bytes).toBe(store.bytes());
      expect(usage.rooms).toEqual([
        { room: room1, user: '1', documents: 2, bytes: 2 * (1 + 64 + 1), ...noChunks },
        { room: room1b, user: '1', documents: 1, bytes: 1 + 64 + 1, ...noChunks },
        { room: room2, user: '2', documents: 1, bytes: 1 + 64 + 1, ...noChunks },
      ]);
      await store.deleteRoom(room1);
      expect((await store.read(room1, 'notes.md', 0, 1 << 20)).entries).toEqual([]);
      expect(texts((await store.read(room1b, 'notes.md', 0, 1 << 20)).entries)).toEqual(['c']);
      expect(store.bytes()).toBe(2 * (1 + 64 + 1));
      await store.deleteUser('1');
      expect((await store.read(room1b, 'notes.md', 0, 1 << 20)).entries).toEqual([]);
      expect(await store.rooms()).toEqual([room2]);
      expect(store.bytes()).toBe(1 + 64 + 1);
      // Freed share: the user may store again.
      expect(await store.append(entry('again'))).toEqual({ pos: 1 });
    });

    it('compacts: drops what a same-kc snapshot of a finished step covers, never another kc, never the current step', async () => {
      const store = await fresh();
      at = Date.UTC(2026, 0, 5, 12, 1, 0);
      await positions(store, [
        entry('a1', { kc: 'A' }),
        entry('b1', { kc: 'B' }),
        entry('a2', { kc: 'A' }),
        entry('snapA', { kc: 'A', covers: 3 }),
        entry('a3', { kc: 'A' }),
      ]);
      // Still in the step: nothing goes.
      expect(await store.compact(at)).toMatchObject({ dropped: 0 });
      const before = store.bytes();
      at = Date.UTC(2026, 0, 5, 12, 11, 0);
      const report = await store.compact(at);
      expect(report.dropped).toBe(2);
      expect(store.bytes()).toBe(before - report.bytes);
      const left = (await store.read(room1, 'notes.md', 0, 1 << 20)).entries;
      expect(texts(left)).toEqual(['b1', 'snapA', 'a3']);
      expect(left.map((e) => e.pos)).toEqual([2, 4, 5]);
      // Positions are never given twice.
      expect(await positions(store, [entry('a4', { kc: 'A' })])).toEqual([6]);
    });

    it('keeps an entry marked keep (a version just before a delete) for the whole window', async () => {
      const store = await fresh();
      at = Date.UTC(2026, 0, 5, 12, 1, 0);
      await positions(store, [
        entry('e1'),
        entry('before delete', { covers: 1, keep: true }),
        entry('e3'),
        entry('snap', { covers: 3 }),
      ]);
      const [kept] = (await store.read(room1, 'notes.md', 1, 1 << 20)).entries;
      expect(kept).toMatchObject({ pos: 2, keep: true });
      at = Date.UTC(2026, 0, 5, 12, 11, 0);
      expect(await store.compact(at)).toMatchObject({ dropped: 2 });
      expect(texts((await store.read(room1, 'notes.md', 0, 1 << 20)).entries)).toEqual([
        'before delete',
        'snap',
      ]);
      at = Date.UTC(2026, 0, 5, 12, 1, 0) + history.keepMs + minuteMs;
      expect(await store.compact(at)).toMatchObject({ dropped: 1 });
      expect(texts((await store.read(room1, 'notes.md', 0, 1 << 20)).entries)).toEqual(['snap']);
    });

    it('compacts across steps only once the snapshot is older than the history window', async () => {
      const store = await fresh();
      at = Date.UTC(2026, 0, 5, 12, 1, 0);
      await positions(store, [entry('old1'), entry('old2')]);
      at = Date.UTC(2026, 0, 5, 12, 31, 0);
      await positions(store, [entry('snap', { covers: 2 })]);
      at = Date.UTC(2026, 0, 6, 12, 0, 0);
      expect(await store.compact(at)).toMatchObject({ dropped: 0 });
      at = Date.UTC(2026, 0, 5, 12, 31, 0) + history.keepMs + minuteMs;
      expect(await store.compact(at)).toMatchObject({ dropped: 2 });
      expect(texts((await store.read(room1, 'notes.md', 0, 1 << 20)).entries)).toEqual(['snap']);
    });
  });
}
