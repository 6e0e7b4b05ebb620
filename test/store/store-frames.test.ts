import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { append, b64, catchUp, testKey, entryText as text } from '../helpers/store-client.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('the document store through the relay (append, catchup)', () => {
  it('acknowledges appends with increasing positions and gives them back in order, across a restart', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    expect(await append(client, 'notes.md', 1, 'one')).toEqual({
      type: 'appended',
      doc: 'notes.md',
      ref: 1,
      pos: 1,
    });
    expect(
      await append(client, 'notes.md', 2, 'two', { ...testKey('k1'), keep: true }),
    ).toMatchObject({
      pos: 2,
    });
    expect(await append(client, 'other.md', 7, 'x')).toMatchObject({ ref: 7, pos: 1 });

    const dir = harness.dir;
    await harness.close({ keepDir: true });
    harness = await startRelayHarness({ dir });
    // Another device of the user, alone in the room: the host alone answers.
    const { client: later } = await harness.joined(room, 1, 2);
    const first = await catchUp(later, 'notes.md');
    expect(first.pos).toBe(2);
    expect(first.entries.map(text)).toEqual(['one', 'two']);
    expect(first.entries[0]).toMatchObject({ pos: 1, from: '1' });
    expect(first.entries[0]).not.toHaveProperty('kc');
    expect(first.entries[0]).not.toHaveProperty('keep');
    expect(first.entries[1]).toMatchObject({ pos: 2, kc: testKey('k1').kc, keep: true });
    expect(typeof first.entries[0]?.at).toBe('number');
    const rest = await catchUp(later, 'notes.md', 1);
    expect(rest.entries.map(text)).toEqual(['two']);
    expect(await catchUp(later, 'notes.md', 2)).toMatchObject({ entries: [], pos: 2 });
    expect(await catchUp(later, 'never.md')).toMatchObject({ entries: [], pos: 0 });
    // Positions continue after the restart.
    expect(await append(later, 'notes.md', 3, 'three')).toMatchObject({ pos: 3 });
  });

  it('keeps each room to itself: a room of the same user and another user see nothing', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    await append(client, 'notes.md', 1, 'secret');
    const { client: sameUser } = await harness.joined(harness.room(1), 1, 2);
    expect(await catchUp(sameUser, 'notes.md')).toMatchObject({ entries: [], pos: 0 });
    const { client: otherUser } = await harness.joined(harness.room(2), 2, 3);
    expect(await catchUp(otherUser, 'notes.md')).toMatchObject({ entries: [], pos: 0 });
  });

  it('splits a long catch-up into pages under message.maxBytes', async () => {
    harness = await startRelayHarness({ config: { messageMaxBytes: 4096, maxQueuedBytes: 8192 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    // Sizes that put two or three entries in a page, and a document key beyond ASCII: pages
    // are measured in bytes, not characters.
    const doc = 'é'.repeat(100);
    for (let i = 1; i <= 40; i++) {
      const data = b64('x'.repeat(800 + 5 * i));
      client.send({ type: 'append', doc, ref: i, data, ...testKey('k') });
    }
    await client.take((f) => f.type === 'appended' && f.ref === 40);
    const before = client.texts.length;
    const { entries, pages, pos } = await catchUp(client, doc);
    expect(pos).toBe(40);
    expect(entries.map((e) => e.pos)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(pages).toBeGreaterThan(10);
    for (const page of client.texts.slice(before)) {
      expect(Buffer.byteLength(page)).toBeLessThanOrEqual(4096);
    }
  });

  it('files an entry under a key check value only with the proof of that key', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const owner = testKey('owner');
    expect(await append(client, 'd', 1, 'sealed', owner)).toMatchObject({ pos: 1 });
    // A device that saw the check value on the wire, with its own proof or none: refused.
    const forged = { kc: owner.kc, kp: testKey('other').kp };
    for (const [ref, extra] of [
      [2, forged],
      [3, { kc: owner.kc }],
      [4, { ...owner, kp: 'x' }],
    ] as const) {
      const answer = await append(client, 'd', ref, 'forged snapshot', { ...extra, covers: 1 });
      expect(answer).toMatchObject({ type: 'error', code: 'invalid_message', ref });
    }
    expect((await catchUp(client, 'd', 0, { kc: owner.kc })).entries.map(text)).toEqual(['sealed']);
  });

  it("names the room's key check values in caughtup when a catch-up asks with keys", async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client } = await harness.joined(room, 1, 1);
    const [one, two] = [testKey('one'), testKey('two')];
    await append(client, 'plain.md', 1, 'not sealed');
    await append(client, 'a', 2, 'sealed', one);
    await append(client, 'b', 3, 'sealed too', two);
    await append(client, 'b', 4, 'again', one);
    const { client: other } = await harness.joined(harness.room(2), 2, 2);
    await append(other, 'a', 1, "another room's", testKey('three'));
    const caughtup = async (doc: string, extra: Record<string, unknown>) => {
      client.send({ type: 'catchup', doc, after: 0, ...extra });
      return client.take((f) => f.type === 'caughtup' && f.doc === doc);
    };
    // Whatever document is caught up (one never written too), the whole room's, in order.
    const kcs = [one.kc, two.kc].sort();
    expect(await caughtup('never.md', { keys: true })).toEqual({
      type: 'caughtup',
      doc: 'never.md',
      pos: 0,
      kcs,
    });
    expect(await caughtup('a', { keys: true, kc: one.kc })).toMatchObject({ pos: 1, kcs });
    // Not asked: not named.
    expect(await caughtup('b', {})).toEqual({ type: 'caughtup', doc: 'b', pos: 2 });
    expect(await caughtup('b', { keys: false })).not.toHaveProperty('kcs');
    client.send({ type: 'catchup', doc: 'b', after: 0, keys: 'yes' });
    expect(await client.error('invalid_message')).toMatchObject({ doc: 'b' });
    const { client: empty } = await harness.joined(harness.room(3), 3, 3);
    empty.send({ type: 'catchup', doc: 'a', after: 0, keys: true });
    expect(await empty.take((f) => f.type === 'caughtup')).toMatchObject({ pos: 0, kcs: [] });
  });

  it('refuses malformed and oversized appends naming their ref, and stores nothing of them', async () => {
    harness = await startRelayHarness({ config: { messageMaxBytes: 2048, maxQueuedBytes: 4096 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    client.send({ type: 'append', doc: 'd', ref: 1, data: 'not base64!' });
    expect(await client.error('invalid_message')).toMatchObject({ doc: 'd', ref: 1 });
    client.send({ type: 'append', doc: 'd', ref: 2 });
    expect(await client.error('invalid_message')).toMatchObject({ doc: 'd', ref: 2 });
    // Fits one frame, but not once sent back with its position, time and sender.
    const big = await append(client, 'd', 3, 'y'.repeat(1490));
    expect(big).toMatchObject({ type: 'error', code: 'invalid_message', ref: 3 });
    expect(big.message).toContain('in pieces');
    expect(await catchUp(client, 'd')).toMatchObject({ entries: [], pos: 0 });
    // A little smaller fits, and its page stays within message.maxBytes.
    expect(await append(client, 'd', 4, 'y'.repeat(1400))).toMatchObject({ pos: 1 });
    const before = client.texts.length;
    expect((await catchUp(client, 'd')).entries).toHaveLength(1);
    const page = client.texts.slice(before).find((t) => t.startsWith('{"type":"stored"'));
    expect(Buffer.byteLength(page ?? '')).toBeGreaterThan(1900);
    expect(Buffer.byteLength(page ?? '')).toBeLessThanOrEqual(2048);
  });

  it('answers a ping only after the answers to the appends sent before it', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    await harness.joined(room, 1, 2);
    // A routed frame first, so that the relay has writes of its own pending in that turn.
    laptop.send({ to: 2, payload: { y: 1 } });
    for (let ref = 1; ref <= 20; ref++) {
      laptop.send({ type: 'append', doc: 'd', ref, data: b64(`entry ${ref}`) });
    }
    await laptop.sync();
    const kinds = laptop.frames.map((f) => f.type).filter((t) => t === 'appended' || t === 'pong');
    expect(kinds).toEqual([...Array(20).fill('appended'), 'pong']);
  });

  it('answers append and catchup before a join with not_joined', async () => {
    harness = await startRelayHarness();
    const client = await harness.client();
    client.send({ type: 'append', doc: 'd', ref: 1, data: b64('a') });
    expect(await client.error('not_joined')).toBeDefined();
    client.send({ type: 'catchup', doc: 'd', after: 0 });
    expect(await client.error('not_joined')).toBeDefined();
  });
});

describe('a store.db that cannot be opened', () => {
  it('stops the start with a line naming the store file, not relay.db', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-garbage-'));
    try {
      writeFileSync(join(dir, 'store.db'), 'this is not a SQLite database, just text'.repeat(100));
      const start = startRelayHarness({ dir });
      await expect(start).rejects.toThrow(
        /sqlite\.path: cannot open the document store .*store\.db \(SQLITE_NOTADB\)/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
