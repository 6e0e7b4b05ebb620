import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { metricAt as metric } from '../helpers/metrics.ts';
import type { RelayClient } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { chunkCall, plainId, putChunk } from '../helpers/store-client.ts';

/**
 * Chunk data in binary frames (docs/relay.md, "Chunks in binary frames"): a `chunk-put` sent as
 * a 4-byte length, a JSON header and the chunk's bytes; `chunk` answers in the same form to a
 * device that puts in it or asks for it; every other binary frame closed with 1003; the bounds
 * counting these frames like text ones.
 */

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** Sends a `chunk-put` in the binary form and waits for the answer naming its ref. */
function putBinary(
  client: RelayClient,
  ref: number,
  data: Buffer,
  extra: Record<string, unknown> = {},
): Promise<Record<string, unknown>> {
  client.sendBinary({ type: 'chunk-put', ref, id: plainId(data), ...extra }, data);
  return client.take((f) => f.ref === ref);
}

/** A frame of 4-byte big-endian length `n`, then `head`, then `rest`. */
function framed(head: Buffer, rest = Buffer.alloc(0), n = head.length): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(n);
  return Buffer.concat([length, head, rest]);
}

const received = 'sync_host_store_chunk_binary_frames_total{direction="received"}';
const sent = 'sync_host_store_chunk_binary_frames_total{direction="sent"}';

describe('chunks in binary frames', () => {
  it('stores a binary chunk-put and answers in the form each device put in or asked for', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const data = randomBytes(200 * 1024);
    const id = plainId(data);
    // Answered in text, like a text put; the bytes counted as sent, not their base64.
    expect(await putBinary(laptop, 1, data)).toEqual({ type: 'chunk-stored', ref: 1, id });
    expect(laptop.texts.at(-1)).toBe(`{"type":"chunk-stored","ref":1,"id":"${id}"}`);
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_received_bytes_total')).toBe(
      data.length,
    );
    // The device that put in binary gets binary chunk frames, unless it asks for text.
    const back = await chunkCall(laptop, { type: 'chunk-get', ref: 2, id });
    expect(back).toMatchObject({ type: 'chunk', ref: 2, id, binary: true });
    expect((back.bytes as Buffer).equals(data)).toBe(true);
    const asText = await chunkCall(laptop, { type: 'chunk-get', ref: 3, id, binary: false });
    expect(asText).toMatchObject({ type: 'chunk', ref: 3, id });
    expect(Buffer.from(asText.data as string, 'base64').equals(data)).toBe(true);

    // Another device: text by default (a device that never heard of binary frames), binary
    // when it asks; a text put of the same chunk stays accepted.
    const { client: desktop } = await harness.joined(room, 1, 2);
    const text = await chunkCall(desktop, { type: 'chunk-get', ref: 1, id });
    expect(text.binary).toBeUndefined();
    expect(Buffer.from(text.data as string, 'base64').equals(data)).toBe(true);
    const binary = await chunkCall(desktop, { type: 'chunk-get', ref: 2, id, binary: true });
    expect(binary).toMatchObject({ type: 'chunk', ref: 2, id, binary: true });
    expect((binary.bytes as Buffer).equals(data)).toBe(true);
    expect(await putChunk(desktop, 3, data)).toEqual({ type: 'chunk-stored', ref: 3, id });
    expect(await chunkCall(desktop, { type: 'chunk-get', ref: 4, id })).not.toHaveProperty('bytes');
    expect(await metric(harness.statusUrl, received)).toBe(1);
    expect(await metric(harness.statusUrl, sent)).toBe(2);
  });

  it('closes with 1003 a malformed binary header, a header of another type and any other binary frame', async () => {
    harness = await startRelayHarness();
    const room = harness.room(1);
    const chunk = randomBytes(1000);
    const id = plainId(chunk);
    const json = (value: unknown) => Buffer.from(JSON.stringify(value));
    const put = { type: 'chunk-put', ref: 1, id };
    const refused: Array<[string, Buffer]> = [
      ['shorter than its length', framed(Buffer.from('{}'))],
      ['a length past the frame', framed(json(put), chunk, json(put).length + chunk.length + 1)],
      ['a header that is not JSON', framed(Buffer.from('{"type":"chunk-put",'), chunk)],
      ['a header that is not UTF-8', framed(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), chunk)],
      ['a header that is an array', framed(json(['chunk-put']), chunk)],
      ['a header without a type', framed(json({ ref: 1, id }), chunk)],
      ['a header with its data', framed(json({ ...put, data: chunk.toString('base64') }), chunk)],
      ['a chunk-get header', framed(json({ type: 'chunk-get', ref: 1, id }))],
      ['an append header', framed(json({ type: 'append', doc: 'd', ref: 1 }), chunk)],
      [
        'a chunk header (the host to device form)',
        framed(json({ type: 'chunk', ref: 1, id }), chunk),
      ],
      ['a routed frame as binary', json({ to: 'host', payload: {} })],
      ['three bytes', Buffer.from([0, 0, 0])],
      ['an empty frame', Buffer.alloc(0)],
    ];
    const { client: other } = await harness.joined(room, 1, 2);
    for (const [device, [what, frame]] of refused.entries()) {
      const { client } = await harness.joined(room, 1, 10 + device);
      client.sendBinary(frame);
      expect(await client.waitClosed(), what).toEqual({
        code: 1003,
        reason: 'binary frames other than chunk-put are not accepted',
      });
    }
    // Before a join, too.
    const unjoined = await harness.client();
    unjoined.sendBinary(framed(json({ type: 'ping' })));
    expect((await unjoined.waitClosed()).code).toBe(1003);
    // Nothing was stored, and the others stay connected.
    expect(await chunkCall(other, { type: 'chunk-have', ref: 9, ids: [id] })).toMatchObject({
      ids: [],
    });
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_bytes')).toBe(0);
    expect(other.closeInfo).toBeUndefined();
  });

  it('answers a binary chunk-put with wrong members as its text form is answered, the connection open', async () => {
    harness = await startRelayHarness();
    const unjoined = await harness.client();
    const data = randomBytes(1000);
    unjoined.sendBinary({ type: 'chunk-put', ref: 1, id: plainId(data) }, data);
    expect(await unjoined.error('not_joined')).toMatchObject({ code: 'not_joined' });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const badId = await putBinary(client, 2, data, { id: 'x' });
    expect(badId).toMatchObject({ type: 'error', code: 'invalid_message', ref: 2 });
    const claimed = plainId(Buffer.from('what the id says'));
    const wrong = await putBinary(client, 3, data, { id: claimed });
    expect(wrong).toMatchObject({ code: 'invalid_message', ref: 3, id: claimed });
    expect(wrong.message).toContain('SHA-256');
    expect(await putBinary(client, 5, data)).toMatchObject({ type: 'chunk-stored', ref: 5 });
    expect(client.closeInfo).toBeUndefined();
  });
});

describe('the bounds count binary frames like text ones', () => {
  it('refuses binary chunk-puts past store.userMaxBytes with store_full as it refuses text ones', async () => {
    const size = 10_000;
    harness = await startRelayHarness({
      config: { storeUserMaxBytes: 2 * (size + 108), storeMaxBytes: 1 << 30 },
    });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const first = randomBytes(size);
    expect(await putBinary(client, 1, first)).toMatchObject({ type: 'chunk-stored' });
    expect(await putChunk(client, 2, randomBytes(size))).toMatchObject({ type: 'chunk-stored' });
    const full = await putBinary(client, 3, randomBytes(size));
    expect(full).toMatchObject({ type: 'error', code: 'store_full', ref: 3 });
    expect(full.message).toContain('store.userMaxBytes');
    expect(await putChunk(client, 4, randomBytes(size))).toMatchObject({ code: 'store_full' });
    // A chunk already held costs nothing, in either form.
    expect(await putBinary(client, 5, first)).toMatchObject({ type: 'chunk-stored', ref: 5 });
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_bytes')).toBe(2 * (size + 108));
  });

  it('refuses a binary chunk over the largest chunk, and closes a binary frame over message.maxBytes with 1009', async () => {
    harness = await startRelayHarness({ config: { messageMaxBytes: 600_000 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const large = randomBytes(256 * 1024 + 1025);
    expect(await putBinary(client, 1, large)).toMatchObject({ code: 'invalid_message', ref: 1 });
    client.sendBinary({ type: 'chunk-put', ref: 2, id: plainId(large) }, randomBytes(600_000));
    expect((await client.waitClosed()).code).toBe(1009);
    expect(await metric(harness.statusUrl, 'sync_host_store_chunk_bytes')).toBe(0);
  });

  it('answers many binary chunk-get at once without closing a receiver that reads (relay.maxQueuedBytes)', async () => {
    harness = await startRelayHarness({ config: { maxQueuedBytes: 1_000_000 } });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const chunks = Array.from({ length: 20 }, () => randomBytes(200 * 1024));
    for (const [i, data] of chunks.entries()) await putBinary(client, i + 1, data);
    chunks.forEach((data, i) => {
      client.send({ type: 'chunk-get', ref: 100 + i, id: plainId(data) });
    });
    for (const [i, data] of chunks.entries()) {
      const got = await client.take((f) => f.ref === 100 + i);
      expect(got).toMatchObject({ type: 'chunk', binary: true });
      expect((got.bytes as Buffer).equals(data)).toBe(true);
    }
    expect(client.closeInfo).toBeUndefined();
  });
});
