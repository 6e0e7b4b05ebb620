import { afterEach, describe, expect, it } from 'vitest';
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
  it('shows each project’s chunks and the folder reports, with names only when not encrypted', async () => {
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
    expect(of(photos.roomId)).toMatchObject({
      documents: 0,
      chunks: 1,
      chunkBytes: 5000 + 64 + 44,
      bytes: 5000 + 64 + 44,
      folders: [
        {
          doc: 'folder',
          files: 2,
          bytes: 5000,
          encrypted: false,
          names: ['a.jpg', 'trip/b.jpg'],
          device: String(alice.deviceId),
          reportedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        },
      ],
    });
    expect(of(vault.roomId)?.folders).toEqual([
      expect.objectContaining({ doc: 'hfolder', files: 40, encrypted: true }),
    ]);
    expect(JSON.stringify(storage)).not.toContain('must not be kept');
  });
});
