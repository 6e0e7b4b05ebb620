import { afterEach, describe, expect, it } from 'vitest';
import { reportBytes } from '../../protocol/relay-frames.ts';
import type { AdminStorage } from '../../server/admin/types.ts';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { append, plainId, putChunk } from '../helpers/store-client.ts';

let th: TestHost | undefined;
const clients: RelayClient[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate();
  await th?.close();
  th = undefined;
});

async function joined(
  host: TestHost,
  room: string,
  me: { deviceId: number; deviceToken: string },
): Promise<RelayClient> {
  const client = new RelayClient(host.relayUrl);
  clients.push(client);
  const answer = await client.join(room, me.deviceId, me.deviceToken);
  if (answer.type !== 'joined') throw new Error(`join refused: ${JSON.stringify(answer)}`);
  return client;
}

describe('GET /admin/api/storage', () => {
  it('shows the bytes stored per user and project, with the bounds, and only to the admin', async () => {
    th = await startTestHost({
      ui: false,
      auth: ['DEFAULT_TIER=team'],
      relay: ['store.userMaxBytes=1000000', 'store.maxBytes=5000000'],
    });
    const alice = await th.signIn('alice@example.com');
    const bob = await th.signIn('bob@example.com');
    const thesis = await registerProject(th.base, alice.deviceToken, 'thesis');
    const notes = await registerProject(th.base, bob.deviceToken, 'notes');
    const aliceClient = await joined(th, thesis.roomId, alice);
    await append(aliceClient, 'a.md', 1, 'x'.repeat(1000));
    await append(aliceClient, 'b.md', 2, 'y'.repeat(500));
    const bobClient = await joined(th, notes.roomId, bob);
    await append(bobClient, 'n.md', 1, 'z'.repeat(100));
    const size = (data: number, device: number) => data + 64 + String(device).length;

    const storage = (await th.admin('GET', '/storage')).body as AdminStorage;
    expect(storage).toEqual({
      state: 'running',
      bytes: size(1000, alice.deviceId) + size(500, alice.deviceId) + size(100, bob.deviceId),
      maxBytes: 5_000_000,
      userMaxBytes: 1_000_000,
      users: [
        {
          userId: alice.userId,
          email: 'alice@example.com',
          bytes: size(1000, alice.deviceId) + size(500, alice.deviceId),
          projects: [
            {
              room: thesis.roomId,
              project: {
                id: thesis.id,
                name: 'Project thesis',
                projectKey: 'thesis',
                email: 'alice@example.com',
              },
              documents: 2,
              bytes: size(1000, alice.deviceId) + size(500, alice.deviceId),
              chunks: 0,
              chunkBytes: 0,
              folders: [],
            },
          ],
        },
        {
          userId: bob.userId,
          email: 'bob@example.com',
          bytes: size(100, bob.deviceId),
          projects: [expect.objectContaining({ room: notes.roomId, documents: 1 })],
        },
      ],
      page: { offset: 0, limit: 50, projects: 2 },
    });
    const overview = (await th.admin('GET', '/overview')).body as { storage: AdminStorage };
    expect(overview.storage).toEqual(storage);

    // A removed project stays listed, without a name, until the store's sweep frees it, its
    // files' chunks with it.
    expect((await th.admin('DELETE', `/projects/${notes.id}`)).status).toBe(204);
    const removed = (await th.admin('GET', '/storage')).body as AdminStorage;
    expect(removed.users[1]?.projects[0]).toMatchObject({ room: notes.roomId, project: null });
    const chunk = Buffer.from('a chunk of a file of the removed project');
    expect(await putChunk(bobClient, 9, chunk)).toMatchObject({ type: 'chunk-stored' });
    await th.host.relay?.sweepStore();
    expect(await th.host.relay?.store?.chunks.get(notes.roomId, '', plainId(chunk))).toBe(
      undefined,
    );
    const swept = (await th.admin('GET', '/storage')).body as AdminStorage;
    expect(swept.users.map((u) => u.email)).toEqual(['alice@example.com']);

    const res = await fetch(`${th.base}/admin/api/storage`);
    expect(res.status).toBe(401);
    expect(await res.text()).not.toContain('thesis');
  });

  it('says so while the relay is paused', async () => {
    th = await startTestHost({ ui: false });
    await th.host.pauseRelay();
    expect((await th.admin('GET', '/storage')).body).toMatchObject({
      state: 'paused',
      bytes: 0,
      users: [],
    });
  });
});

describe('GET /admin/api/storage: files', () => {
  it('shows each project’s chunks and the folder reports, their names apart and only when not encrypted', async () => {
    th = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=team'] });
    const alice = await th.signIn('alice@example.com');
    const photos = await registerProject(th.base, alice.deviceToken, 'photos');
    const vault = await registerProject(th.base, alice.deviceToken, 'vault');
    const plain = await joined(th, photos.roomId, alice);
    const data = Buffer.alloc(5000, 7);
    await putChunk(plain, 1, data);
    plain.send({
      type: 'folder-report',
      doc: 'folder',
      files: 2,
      bytes: 5000,
      encrypted: false,
      names: ['a.jpg', 'trip/b.jpg'],
    });
    const sealed = await joined(th, vault.roomId, alice);
    sealed.send({
      type: 'folder-report',
      doc: 'hfolder',
      files: 40,
      bytes: 1_000_000,
      encrypted: true,
      names: ['must not be kept.md'],
    });
    await plain.sync();
    await sealed.sync();
    const storage = (await th.admin('GET', '/storage')).body as AdminStorage;
    const projects = storage.users[0]?.projects ?? [];
    const of = (room: string) => projects.find((p) => p.room === room);
    const device = String(alice.deviceId);
    const names = ['a.jpg', 'trip/b.jpg'];
    const reported = reportBytes({ doc: 'folder', device, names });
    expect(of(photos.roomId)).toEqual({
      room: photos.roomId,
      project: expect.objectContaining({ projectKey: 'photos' }),
      documents: 0,
      chunks: 1,
      chunkBytes: 5000 + 64 + 44,
      bytes: 5000 + 64 + 44 + reported,
      folders: [
        {
          doc: 'folder',
          files: 2,
          bytes: 5000,
          encrypted: false,
          named: 2,
          device,
          reportedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        },
      ],
    });
    expect(of(vault.roomId)?.folders).toEqual([
      expect.objectContaining({ doc: 'hfolder', files: 40, encrypted: true, named: 0 }),
    ]);
    // The names come one folder at a time, never in the storage or the overview.
    expect(JSON.stringify(storage)).not.toContain('trip/b.jpg');
    const query = (room: string, doc: string) =>
      `/storage/names?room=${encodeURIComponent(room)}&doc=${encodeURIComponent(doc)}`;
    expect((await th.admin('GET', query(photos.roomId, 'folder'))).body).toEqual({ names });
    const sealedNames = await th.admin('GET', query(vault.roomId, 'hfolder'));
    expect(sealedNames.status).toBe(404);
    expect(JSON.stringify(sealedNames.body)).not.toContain('must not be kept');
    expect((await th.admin('GET', query(photos.roomId, 'nothing'))).status).toBe(404);
    expect((await th.admin('GET', '/storage/names?room=x')).body).toMatchObject({
      error: { code: 'invalid_request' },
    });
    expect(JSON.stringify(storage)).not.toContain('must not be kept');
  });
});

describe('GET /admin/api/overview and /storage: pages', () => {
  it('lists one page of projects, at most 100, with summaries of the folder reports only', async () => {
    th = await startTestHost({ ui: false, auth: ['DEFAULT_TIER=team'] });
    const alice = await th.signIn('alice@example.com');
    const rooms: string[] = [];
    for (const key of ['p1', 'p2', 'p3']) {
      const project = await registerProject(th.base, alice.deviceToken, key);
      const client = await joined(th, project.roomId, alice);
      // Each project a different size, so the order is known: p3 first.
      await append(client, 'a.md', 1, 'x'.repeat(100 * rooms.length + 100));
      const names = Array.from({ length: 2000 }, (_, i) => `${key}/${'n'.repeat(100)}/${i}`);
      client.send({
        type: 'folder-report',
        doc: 'folder',
        files: 2000,
        bytes: 1,
        encrypted: false,
        names,
      });
      await client.sync();
      rooms.unshift(project.roomId);
    }
    const page = async (path: string) => (await th?.admin('GET', path))?.body as AdminStorage;
    const listed = (storage: AdminStorage) =>
      storage.users.flatMap((u) => u.projects.map((p) => p.room));
    const all = await page('/storage');
    expect(listed(all)).toEqual(rooms);
    expect(all.page).toEqual({ offset: 0, limit: 50, projects: 3 });
    expect(all.users[0]?.projects[0]?.folders[0]).toMatchObject({ named: 2000 });
    expect(JSON.stringify(all).length).toBeLessThan(5_000);
    const second = await page('/storage?offset=1&limit=1');
    expect(listed(second)).toEqual([rooms[1]]);
    expect(second.page).toEqual({ offset: 1, limit: 1, projects: 3 });
    // A user's bytes are all of its projects', whichever page shows them.
    expect(second.users[0]?.bytes).toBe(all.users[0]?.bytes);
    expect(second.bytes).toBe(all.bytes);
    expect(listed(await page('/storage?offset=3'))).toEqual([]);
    const overview = (await th.admin('GET', '/overview?storageOffset=2&storageLimit=1')).body as {
      storage: AdminStorage;
    };
    expect(listed(overview.storage)).toEqual([rooms[2]]);
    expect(JSON.stringify(overview)).not.toContain('nnnnnnnnnn');
    for (const bad of ['/storage?limit=101', '/storage?offset=-1', '/overview?storageLimit=x']) {
      const answer = await th.admin('GET', bad);
      expect(answer.status, bad).toBe(400);
      expect(answer.body).toMatchObject({ error: { code: 'invalid_request' } });
    }
  });
});
