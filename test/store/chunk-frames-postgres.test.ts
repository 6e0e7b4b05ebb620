import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import { openPostgresStore } from '../../server/store/postgres-store.ts';
import { dbTargets } from '../helpers/databases.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { chunkCall, plainId, putChunk, sealedId, testKey } from '../helpers/store-client.ts';

/**
 * The chunk frames of a relay whose store is the cluster's PostgreSQL one (as a cluster node
 * has it): its commits take a round trip, so answers come later than the frames after them.
 */
const postgres = (await dbTargets()).find((target) => target.name === 'postgres');
const skip = postgres === undefined ? 'no PostgreSQL target' : postgres.skip;

let harness: RelayHarness | undefined;
let database: { drop(): Promise<void> } | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await database?.drop();
  database = undefined;
});

async function startOnPostgres(): Promise<RelayHarness> {
  const created = await postgres?.create('');
  database = created;
  const config = created?.config;
  if (config?.driver !== 'postgres') throw new Error('no PostgreSQL database');
  const store = openPostgresStore({
    url: `postgres://${config.user}@${config.host}:${config.port}/${config.database}`,
    bounds: { userMaxBytes: 1 << 30, maxBytes: 1 << 30 },
    history: { keepMs: 30 * 24 * 3_600_000, stepMs: 600_000 },
    logger: createLogger('silent'),
  });
  await store.ready();
  return startRelayHarness({ store });
}

const title = skip
  ? `chunk frames on the PostgreSQL store: skipped, ${skip}`
  : 'chunk frames on the PostgreSQL store';

describe.skipIf(skip !== undefined)(title, () => {
  it('stores, finds and gives back chunks, per key, and a pong follows every answer', async () => {
    harness = await startOnPostgres();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    const chunks = Array.from({ length: 20 }, () => randomBytes(30_000));
    chunks.forEach((data, i) => {
      client.send({
        type: 'chunk-put',
        ref: i + 1,
        id: plainId(data),
        data: data.toString('base64'),
      });
    });
    client.send({ type: 'chunk-have', ref: 21, ids: chunks.map(plainId) });
    client.send({ type: 'chunk-get', ref: 22, id: plainId(chunks[0] as Buffer) });
    await client.sync();
    const kinds = client.frames.map((f) => f.type).filter((t) => t !== 'joined');
    expect(kinds.at(-1)).toBe('pong');
    expect(kinds.filter((t) => t === 'chunk-stored')).toHaveLength(20);
    const held = client.frames.find((f) => f.type === 'chunk-held');
    expect(held?.ids).toEqual(chunks.map(plainId));
    const got = client.frames.find((f) => f.type === 'chunk');
    expect(Buffer.from(got?.data as string, 'base64').equals(chunks[0] as Buffer)).toBe(true);

    // Sealed chunks stay per key: another key's put of the same id replaces nothing.
    const id = sealedId('one');
    const sealed = randomBytes(500);
    expect(await putChunk(client, 30, sealed, { id, ...testKey('a') })).toMatchObject({
      type: 'chunk-stored',
    });
    await putChunk(client, 31, randomBytes(500), { id, ...testKey('b') });
    const back = await chunkCall(client, { type: 'chunk-get', ref: 32, id, kc: testKey('a').kc });
    expect(Buffer.from(back.data as string, 'base64').equals(sealed)).toBe(true);
  });
  it('drops a chunk reported damaged only when it is (unencrypted) or on its key proof (sealed)', async () => {
    harness = await startOnPostgres();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const good = randomBytes(1000);
    await putChunk(client, 1, good);
    const report = { type: 'chunk-bad', ref: 2, ids: [plainId(good)] };
    expect(await chunkCall(client, report)).toMatchObject({ type: 'chunk-dropped', ids: [] });
    const id = sealedId('bad');
    const key = testKey('a');
    await putChunk(client, 3, randomBytes(500), { id, ...key });
    const forged = { type: 'chunk-bad', ref: 4, ids: [id], kc: key.kc, kp: testKey('b').kp };
    expect(await chunkCall(client, forged)).toMatchObject({ code: 'invalid_message', ref: 4 });
    const proven = { type: 'chunk-bad', ref: 5, ids: [id], ...key };
    expect(await chunkCall(client, proven)).toMatchObject({ type: 'chunk-dropped', ids: [id] });
    const ids = [plainId(good), id];
    expect(await chunkCall(client, { type: 'chunk-have', ref: 6, ids, kc: key.kc })).toMatchObject({
      ids: [],
    });
    expect(await chunkCall(client, { type: 'chunk-have', ref: 7, ids })).toMatchObject({
      ids: [plainId(good)],
    });
    expect(harness.relay.store?.bytes()).toBe(1000 + 64 + 44);
  });
});
