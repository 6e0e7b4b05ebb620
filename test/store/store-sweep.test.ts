import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import type { DocumentStore } from '../../server/store/document-store.ts';
import type { RoomDirectory } from '../../server/store/room-directory.ts';
import { openSqliteStore } from '../../server/store/sqlite-store.ts';
import { createStoreSweep } from '../../server/store/store-sweep.ts';

const dirs: string[] = [];
const stores: DocumentStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const roomA = '1.0000000000000000000000000000000a.0000000000000000000000000000000a';
const roomB = '2.0000000000000000000000000000000b.0000000000000000000000000000000b';

async function storeWithTwoRooms(): Promise<DocumentStore> {
  const dir = mkdtempSync(join(tmpdir(), 'store-sweep-'));
  dirs.push(dir);
  const store = openSqliteStore({
    path: join(dir, 'store.db'),
    bounds: { userMaxBytes: 1 << 20, maxBytes: 1 << 20 },
    history: { keepMs: 86_400_000, stepMs: 600_000 },
  });
  stores.push(store);
  for (const room of [roomA, roomB]) {
    await store.append({ room, doc: 'd', device: '1', data: Buffer.from('x') });
  }
  return store;
}

function sweepWith(store: DocumentStore, rooms: RoomDirectory, logs: string[] = []) {
  const logger = createLogger('debug', { write: (line: string) => logs.push(line) });
  return createStoreSweep({ store, rooms, logger, now: Date.now });
}

describe('the document store sweep', () => {
  it('removes the documents of rooms whose project is gone, and only those', async () => {
    const store = await storeWithTwoRooms();
    await sweepWith(store, { existing: async () => new Set([roomB]) })();
    expect(await store.rooms()).toEqual([roomB]);
  });

  it('deletes nothing when the auth database has no user at all (new or replaced)', async () => {
    const store = await storeWithTwoRooms();
    await sweepWith(store, { existing: async () => undefined })();
    expect((await store.rooms()).sort()).toEqual([roomA, roomB]);
  });

  it('deletes nothing while the auth side cannot answer, and says so once', async () => {
    const store = await storeWithTwoRooms();
    const logs: string[] = [];
    const sweep = sweepWith(
      store,
      { existing: () => Promise.reject(new Error('database down')) },
      logs,
    );
    await sweep();
    await sweep();
    expect((await store.rooms()).sort()).toEqual([roomA, roomB]);
    expect(logs.filter((line) => line.includes('projects cannot be listed'))).toHaveLength(1);
  });
});
