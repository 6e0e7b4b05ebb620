import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { chunkAnswer } from '../../server/relay/chunk-frames.ts';
import { metricAt as metric } from '../helpers/metrics.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { chunkCall, plainId, putChunk, sealedId, testKey } from '../helpers/store-client.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const dayMs = 24 * 60 * 60 * 1_000;

/** What one unencrypted chunk counts against the bounds: bytes + 64 + its id's 44 characters. */
const counted = (data: Buffer) => data.length + 64 + 44;

describe('the chunk frames through the relay (chunk-put, chunk-have, chunk-get)', () => {
  it('stores a chunk, says it holds it, gives it back byte for byte, across a restart', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const data = randomBytes(200 * 1024);
    const id = plainId(data);
    expect(await putChunk(laptop, 1, data)).toEqual({ type: 'chunk-stored', ref: 1, id });
    // Again: answered at once, counted once.
    expect(await putChunk(laptop, 2, data)).toEqual({ type: 'chunk-stored', ref: 2, id });
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_bytes')).toBe(counted(data));
    expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(counted(data));
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_received_bytes_total')).toBe(
      2 * data.length,
    );

    const dir = harness.dir;
    await harness.close({ keepDir: true });
    harness = await startRelayHarness({ dir });
    const { client: desktop } = await harness.joined(room, 1, 2);
    const other = plainId(Buffer.from('never sent'));
    expect(await chunkCall(desktop, { type: 'chunk-have', ref: 5, ids: [other, id] })).toEqual({
      type: 'chunk-held',
      ref: 5,
      ids: [id],
    });
    const got = await chunkCall(desktop, { type: 'chunk-get', ref: 6, id });
    expect(got).toMatchObject({ type: 'chunk', ref: 6, id });
    expect(Buffer.from(got.data as string, 'base64').equals(data)).toBe(true);
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_sent_bytes_total')).toBe(
      data.length,
    );
    expect(await chunkCall(desktop, { type: 'chunk-get', ref: 7, id: other })).toMatchObject({
      type: 'error',
      code: 'chunk_missing',
      ref: 7,
      id: other,
    });
    // Another room, even of the same user, does not see it.
    const { client: elsewhere } = await harness.joined(harness.room(2), 2, 3);
    expect(await chunkCall(elsewhere, { type: 'chunk-get', ref: 1, id })).toMatchObject({
      code: 'chunk_missing',
    });
  });

  it('answers a have and a get sent right after a put on one connection with the chunk', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const datas = [randomBytes(250 * 1024), randomBytes(1000), randomBytes(250 * 1024)];
    const ids = datas.map(plainId);
    // Sent back to back, no answer awaited: the puts' ids are checked off the relay's thread,
    // and the have and gets that follow still see every chunk put before them.
    datas.forEach((data, i) => {
      client.send({ type: 'chunk-put', ref: i + 1, id: ids[i], data: data.toString('base64') });
    });
    const have = chunkCall(client, { type: 'chunk-have', ref: 10, ids });
    const gets = ids.map((id, i) => chunkCall(client, { type: 'chunk-get', ref: 20 + i, id }));
    expect(await have).toEqual({ type: 'chunk-held', ref: 10, ids });
    for (const [i, get] of gets.entries()) {
      const got = await get;
      expect(got).toMatchObject({ type: 'chunk', ref: 20 + i, id: ids[i] });
      expect(Buffer.from(got.data as string, 'base64').equals(datas[i] as Buffer)).toBe(true);
    }
  });

  it('refuses an unencrypted chunk whose id is not the SHA-256 of its data, and stores nothing', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const claimed = plainId(Buffer.from('what the id says'));
    const refused = await putChunk(client, 1, Buffer.from('other bytes'), { id: claimed });
    expect(refused).toMatchObject({ type: 'error', code: 'invalid_message', ref: 1, id: claimed });
    expect(refused.message).toContain('SHA-256');
    expect(await chunkCall(client, { type: 'chunk-get', ref: 2, id: claimed })).toMatchObject({
      code: 'chunk_missing',
    });
    // Malformed frames name their ref; the connection stays open.
    const bad = await chunkCall(client, { type: 'chunk-put', ref: 3, id: 'x', data: 'AA==' });
    expect(bad).toMatchObject({ code: 'invalid_message', ref: 3 });
    const many = Array.from({ length: 1001 }, () => claimed);
    expect(await chunkCall(client, { type: 'chunk-have', ref: 4, ids: many })).toMatchObject({
      code: 'invalid_message',
      ref: 4,
    });
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_bytes')).toBe(0);
  });

  it('keeps sealed chunks per key: without the proof of kc refused, another key cannot replace them', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const mine = testKey('mine');
    const theirs = testKey('theirs');
    const id = sealedId('chunk 1');
    const sealed = randomBytes(1000);
    expect(await putChunk(laptop, 1, sealed, { id, ...mine })).toMatchObject({
      type: 'chunk-stored',
    });
    // A device that saw kc on the wire but has no proof: refused.
    const forged = await putChunk(laptop, 2, randomBytes(1000), { id, kc: mine.kc, kp: theirs.kp });
    expect(forged).toMatchObject({ code: 'invalid_message', ref: 2, id });
    expect(await putChunk(laptop, 3, randomBytes(10), { id, kc: mine.kc })).toMatchObject({
      code: 'invalid_message',
    });
    // A device with another passphrase files the same id under its own kc only.
    const { client: intruder } = await harness.joined(room, 1, 2);
    const poison = randomBytes(1000);
    expect(await putChunk(intruder, 1, poison, { id, ...theirs })).toMatchObject({
      type: 'chunk-stored',
    });
    const got = await chunkCall(laptop, { type: 'chunk-get', ref: 4, id, kc: mine.kc });
    expect(Buffer.from(got.data as string, 'base64').equals(sealed)).toBe(true);
    const theirsGot = await chunkCall(intruder, { type: 'chunk-get', ref: 2, id, kc: theirs.kc });
    expect(Buffer.from(theirsGot.data as string, 'base64').equals(poison)).toBe(true);
    // Unencrypted readers do not see sealed chunks.
    expect(await chunkCall(laptop, { type: 'chunk-have', ref: 5, ids: [id] })).toMatchObject({
      ids: [],
    });
  });

  it('refuses chunks past store.userMaxBytes with store_full, keeps what it had, and takes held ones', async () => {
    const size = 10_000;
    harness = await startRelayHarness({
      config: { storeUserMaxBytes: 2 * (size + 108), storeMaxBytes: 1 << 30 },
    });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const first = randomBytes(size);
    expect(await putChunk(client, 1, first)).toMatchObject({ type: 'chunk-stored' });
    expect(await putChunk(client, 2, randomBytes(size))).toMatchObject({ type: 'chunk-stored' });
    const full = await putChunk(client, 3, randomBytes(size));
    expect(full).toMatchObject({ type: 'error', code: 'store_full', ref: 3 });
    expect(full.message).toContain('store.userMaxBytes');
    // A chunk already held costs nothing: still answered chunk-stored.
    expect(await putChunk(client, 4, first)).toMatchObject({ type: 'chunk-stored', ref: 4 });
    // Documents count against the same bound.
    client.send({ type: 'append', doc: 'd', ref: 5, data: Buffer.from('x').toString('base64') });
    expect(await client.take((f) => f.ref === 5)).toMatchObject({ code: 'store_full' });
    // Another user's share is untouched.
    const { client: other } = await harness.joined(harness.room(2), 2, 2);
    expect(await putChunk(other, 1, randomBytes(size))).toMatchObject({ type: 'chunk-stored' });
  });

  it('sends a pong only after the answers to every chunk frame sent before the ping', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    await harness.joined(room, 1, 2);
    // A routed frame first, so that the relay has writes of its own pending in that turn.
    client.send({ to: 2, payload: { y: 1 } });
    for (let ref = 1; ref <= 20; ref++) {
      const data = randomBytes(50_000);
      client.send({ type: 'chunk-put', ref, id: plainId(data), data: data.toString('base64') });
    }
    client.send({ type: 'chunk-have', ref: 21, ids: [] });
    client.send({ type: 'chunk-get', ref: 22, id: plainId(Buffer.from('absent')) });
    await client.sync();
    const kinds = client.frames
      .map((f) => (f.type === 'error' ? f.code : f.type))
      .filter((t) => t !== 'joined' && t !== 'presence');
    expect(kinds).toEqual([
      ...Array(20).fill('chunk-stored'),
      'chunk-held',
      'chunk_missing',
      'pong',
    ]);
  });

  it('answers many chunk-get at once without closing a receiver that reads (relay.maxQueuedBytes)', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const chunks = Array.from({ length: 30 }, () => randomBytes(200 * 1024));
    for (const [i, data] of chunks.entries()) await putChunk(client, i + 1, data);
    chunks.forEach((data, i) => {
      client.send({ type: 'chunk-get', ref: 100 + i, id: plainId(data) });
    });
    for (const [i, data] of chunks.entries()) {
      const got = await client.take((f) => f.ref === 100 + i);
      expect(got.type).toBe('chunk');
      expect(Buffer.from(got.data as string, 'base64').equals(data)).toBe(true);
    }
  });

  it('drops chunks unused for longer than the history window at the sweep, keeps those asked about', async () => {
    harness = await startRelayHarness({ config: { storeHistoryDays: 2 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const kept = randomBytes(100);
    const dropped = randomBytes(100);
    await putChunk(client, 1, kept);
    await putChunk(client, 2, dropped);
    harness.clock.advance(2 * dayMs);
    await chunkCall(client, { type: 'chunk-have', ref: 3, ids: [plainId(kept)] });
    harness.clock.advance(1 * dayMs + 1);
    await harness.relay.sweepStore();
    const ids = [plainId(kept), plainId(dropped)];
    expect(await chunkCall(client, { type: 'chunk-have', ref: 4, ids })).toMatchObject({
      ids: [plainId(kept)],
    });
    expect(await metric(harness.statusUrl, 'sync_host_store_bytes')).toBe(counted(kept));
  });

  it('answers chunk frames with store_unavailable on a relay that keeps no store (a cluster node without store.url)', async () => {
    harness = await startRelayHarness({ store: null });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const data = Buffer.from('x');
    expect(await putChunk(client, 1, data)).toMatchObject({
      code: 'store_unavailable',
      ref: 1,
      id: plainId(data),
    });
    expect(await chunkCall(client, { type: 'chunk-have', ref: 2, ids: [] })).toMatchObject({
      code: 'store_unavailable',
    });
    client.send({ type: 'folder-report', doc: 'd', files: 1, bytes: 1, encrypted: true });
    await client.sync();
  });

  it('keeps the latest folder report per folder, without names when encrypted; chunk frames need a join', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    const report = { type: 'folder-report', files: 2, bytes: 300, encrypted: false };
    client.send({ ...report, doc: 'plain', files: 1, names: ['old.txt'] });
    client.send({ ...report, doc: 'plain', names: ['a.txt', 'photos/b.jpg'] });
    client.send({ ...report, doc: 'hsealed', encrypted: true, names: ['secret.txt'] });
    await client.sync();
    const usage = await harness.relay.store?.usage();
    expect(usage?.rooms).toEqual([
      expect.objectContaining({
        room,
        documents: 0,
        chunks: 0,
        folders: [
          {
            doc: 'hsealed',
            device: '1',
            files: 2,
            bytes: 300,
            encrypted: true,
            named: 0,
            at: expect.any(Number),
          },
          {
            doc: 'plain',
            device: '1',
            files: 2,
            bytes: 300,
            encrypted: false,
            named: 2,
            at: expect.any(Number),
          },
        ],
      }),
    ]);
    expect(await harness.relay.store?.chunks.reportNames(room, 'plain')).toEqual([
      'a.txt',
      'photos/b.jpg',
    ]);
    expect(await harness.relay.store?.chunks.reportNames(room, 'hsealed')).toBeUndefined();
    const outside = await harness.client();
    outside.send({ type: 'chunk-have', ref: 1, ids: [] });
    expect(await outside.error('not_joined')).toBeDefined();
  });
});

describe('chunkAnswer', () => {
  it('writes the chunk frame JSON.stringify would, at every length modulo 3', () => {
    for (const length of [0, 1, 2, 3, 4, 5, 262_143, 262_144]) {
      const data = randomBytes(length);
      const id = plainId(data);
      const frame = { type: 'chunk', ref: length + 1, id, data: data.toString('base64') };
      expect(chunkAnswer(length + 1, id, data).toString('latin1')).toBe(JSON.stringify(frame));
    }
  });
});
