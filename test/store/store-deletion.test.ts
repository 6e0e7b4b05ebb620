import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { append, catchUp } from '../helpers/store-client.ts';

let h: TestHost | undefined;
const clients: RelayClient[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate();
  await h?.close();
  h = undefined;
});

interface Member {
  userId: number;
  deviceId: number;
  deviceToken: string;
}

async function joined(host: TestHost, me: Member, room: string): Promise<RelayClient> {
  const client = new RelayClient(host.relayUrl);
  clients.push(client);
  const answer = await client.join(room, me.deviceId, me.deviceToken);
  if (answer.type !== 'joined') throw new Error(`join refused: ${JSON.stringify(answer)}`);
  return client;
}

/** store.db and its WAL on disk. */
function storeFileBytes(host: TestHost): number {
  const path = join(host.dir, 'data', 'store.db');
  const wal = (() => {
    try {
      return statSync(`${path}-wal`).size;
    } catch {
      return 0;
    }
  })();
  return statSync(path).size + wal;
}

/** Fills a document with `count` entries of 8 KiB. */
async function fill(client: RelayClient, doc: string, count: number): Promise<void> {
  const data = Buffer.alloc(8192, 7).toString('base64');
  for (let ref = 1; ref <= count; ref++) client.send({ type: 'append', doc, ref, data });
  await client.take((f) => f.type === 'appended' && f.doc === doc && f.ref === count, 15_000);
}

describe('deleting a project or a user removes its documents from the store', () => {
  it('forgets a deleted project at the next store sweep and gives the disk space back', async () => {
    h = await startTestHost({ auth: ['DEFAULT_TIER=pro'] });
    const me = await h.signIn('ada@example.org');
    const kept = await registerProject(h.base, me.deviceToken, 'kept');
    const doomed = await registerProject(h.base, me.deviceToken, 'doomed');
    const keptClient = await joined(h, me, kept.roomId);
    expect(await append(keptClient, 'notes.md', 1, 'stays')).toMatchObject({ type: 'appended' });
    const doomedClient = await joined(h, me, doomed.roomId);
    await fill(doomedClient, 'big.md', 400);
    const relay = h.host.relay;
    if (relay === undefined) throw new Error('no relay');
    // A sweep with both projects present removes nothing.
    await relay.sweepStore();
    const before = storeFileBytes(h);
    expect(before).toBeGreaterThan(3_000_000);
    expect((await relay.store?.usage())?.rooms.map((r) => r.room).sort()).toEqual(
      [kept.roomId, doomed.roomId].sort(),
    );

    const res = await fetch(`${h.base}/auth/project/${doomed.id}`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${me.deviceToken}` },
    });
    expect(res.status).toBe(204);
    await relay.sweepStore();
    expect((await relay.store?.usage())?.rooms.map((r) => r.room)).toEqual([kept.roomId]);
    expect(storeFileBytes(h)).toBeLessThan(before / 4);
    const again = await joined(h, me, kept.roomId);
    expect((await catchUp(again, 'notes.md')).entries).toHaveLength(1);
  });

  it('forgets every project of a deleted user, and only theirs', async () => {
    h = await startTestHost({ auth: ['DEFAULT_TIER=pro'] });
    const owner = await h.signIn('owner@example.org');
    const gone = await h.signIn('gone@example.org');
    const ownerProject = await registerProject(h.base, owner.deviceToken, 'notes');
    const goneProjects = [
      await registerProject(h.base, gone.deviceToken, 'a'),
      await registerProject(h.base, gone.deviceToken, 'b'),
    ];
    const ownerClient = await joined(h, owner, ownerProject.roomId);
    await append(ownerClient, 'notes.md', 1, 'mine');
    for (const p of goneProjects) {
      const client = await joined(h, gone, p.roomId);
      expect(await append(client, 'notes.md', 1, 'theirs')).toMatchObject({ type: 'appended' });
    }
    const relay = h.host.relay;
    if (relay === undefined) throw new Error('no relay');
    expect((await relay.store?.usage())?.rooms).toHaveLength(3);
    expect((await h.admin('DELETE', `/users/${gone.userId}`)).status).toBeLessThan(300);
    await relay.sweepStore();
    const usage = await relay.store?.usage();
    expect(usage?.rooms.map((r) => r.room)).toEqual([ownerProject.roomId]);
    expect(usage?.bytes).toBe(4 + 64 + String(owner.deviceId).length);
  });
});
