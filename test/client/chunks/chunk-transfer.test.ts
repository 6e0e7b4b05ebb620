import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { ChunkTransfer, downloadFile, uploadFile } from '../../../client/chunks/index.ts';
import { deriveE2EKey, type E2EKey } from '../../../client/e2e-key.ts';
import type { SyncError } from '../../../client/errors.ts';
import { createRelayConnection, type RelayConnection } from '../../../client/relay-connection.ts';
import { FakeRelay } from '../../helpers/fake-relay.ts';
import { eventually } from '../../helpers/wait.ts';
import { ChunkHostFake } from './chunk-host-fake.ts';

/**
 * The chunk library against the scripted fake relay playing the host's chunk store: fast and
 * deterministic (held answers, damaged chunks, refusals, drops). The same behaviours against
 * the real host: chunks-host.test.ts.
 */

let relay: FakeRelay;
let host: ChunkHostFake;
let dir: string;
const opened: Array<{ close(): unknown }> = [];

beforeEach(async () => {
  host = new ChunkHostFake();
  relay = await FakeRelay.start({ onFrame: host.onFrame });
  dir = mkdtempSync(join(tmpdir(), 'sync-host-chunks-'));
});

afterEach(async () => {
  for (const item of opened.splice(0).reverse()) await item.close();
  await relay.close();
  rmSync(dir, { recursive: true, force: true });
  const refused = relay.connections.flatMap((c) => c.received.filter((f) => f.type === 'invalid'));
  expect(refused).toEqual([]);
});

async function transfer(
  options: {
    key?: E2EKey;
    maxInFlightBytes?: number;
    maxMessageBytes?: number;
    binaryChunks?: boolean;
  } = {},
): Promise<{ t: ChunkTransfer; connection: RelayConnection }> {
  const connection = createRelayConnection({
    url: relay.url,
    room: 'room-1',
    device: '2',
    token: 'token',
    WebSocket,
    backoff: { initialDelayMs: 10, maxDelayMs: 50 },
    maxMessageBytes: options.maxMessageBytes,
    binaryChunks: options.binaryChunks,
  });
  opened.push(connection);
  await connection.connect();
  const t = new ChunkTransfer({ connection, ...options });
  opened.push(t);
  return { t, connection };
}

function file(name: string, bytes: Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

async function rejection(promise: Promise<unknown>): Promise<SyncError> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err as SyncError,
  );
}

describe('the chunk transfer against a scripted host', () => {
  it('puts a file as chunks and writes it back byte for byte, in the clear and sealed', async () => {
    const key = await deriveE2EKey('correct horse', 'room-1', 1000);
    for (const options of [{}, { key }, { binaryChunks: false }, { key, binaryChunks: false }]) {
      const { t } = await transfer(options);
      const bytes = randomBytes(3 * t.chunkBytes + 1234);
      const up = await uploadFile(t, file('in.bin', bytes));
      expect(up.chunks.map((c) => c.size)).toEqual([
        t.chunkBytes,
        t.chunkBytes,
        t.chunkBytes,
        1234,
      ]);
      expect(up.size).toBe(bytes.length);
      const down = await downloadFile(t, up.chunks, join(dir, 'out.tmp'));
      expect(down).toEqual({ size: up.size, digest: up.digest });
      expect(readFileSync(join(dir, 'out.tmp')).equals(bytes)).toBe(true);
    }
    // Sealed: ids keyed, data not the plaintext; in the clear: ids are the data's SHA-256.
    const puts = host.sent('chunk-put');
    const clear = [...puts.slice(0, 4), ...puts.slice(8, 12)];
    const sealed = [...puts.slice(4, 8), ...puts.slice(12)];
    expect(clear.every((p) => (p.id as string).startsWith('s') && !p.kc)).toBe(true);
    expect(sealed.every((p) => (p.id as string).startsWith('h') && p.kc === key.check)).toBe(true);
    // binary frames by default; text ones with `data` last: the host parses the frame without
    // it (server/relay/messages.ts).
    expect(puts.map((p) => p.binary === true)).toEqual([
      ...Array(8).fill(true),
      ...Array(8).fill(false),
    ]);
    expect(puts.slice(8).map((p) => Object.keys(p).at(-1))).toEqual(Array(8).fill('data'));
    const gets = host.sent('chunk-get');
    expect(gets.map((g) => g.binary)).toEqual([
      ...Array(8).fill(true),
      ...Array(8).fill(undefined),
    ]);
  });

  it('sends a chunk the host holds, or one repeated in the file, only once', async () => {
    const { t } = await transfer();
    const block = randomBytes(t.chunkBytes);
    const path = file('twice.bin', Buffer.concat([block, block, block, randomBytes(10)]));
    const first = await uploadFile(t, path);
    expect(host.sent('chunk-put')).toHaveLength(2);
    let counted = 0;
    const second = await uploadFile(t, path, (n) => {
      counted += n;
    });
    expect(second).toEqual(first);
    expect(counted).toBe(first.size);
    expect(host.sent('chunk-put')).toHaveLength(2);
    expect(host.sent('chunk-have')).toHaveLength(2);
  });

  it('keeps at most maxInFlightBytes of chunks being put at once', async () => {
    const { t } = await transfer({ maxInFlightBytes: 3 * 262_144 });
    host.hold = true;
    const upload = uploadFile(t, file('big.bin', randomBytes(10 * t.chunkBytes)));
    await eventually(() => host.sent('chunk-have').length === 1, 'the chunk-have');
    host.release(1);
    await eventually(() => host.sent('chunk-put').length === 3, 'three puts');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(host.sent('chunk-put')).toHaveLength(3);
    host.hold = false;
    host.release();
    const done = await upload;
    expect(done.chunks).toHaveLength(10);
    expect(host.chunks.size).toBe(10);
    expect(host.maxPutsInFlight).toBeLessThanOrEqual(3);
  });

  it('fetches a chunk that fails its check again, never returns it, and reports it to the host', async () => {
    const key = await deriveE2EKey('correct horse', 'room-1', 1000);
    for (const options of [{}, { key }]) {
      const { t } = await transfer(options);
      const plain = randomBytes(5000);
      const id = await t.idOf(plain);
      await t.put(id, plain);
      host.damageGets = 2;
      const gets = host.sent('chunk-get').length;
      const reports = host.sent('chunk-bad').length;
      expect(Buffer.from(await t.get(id)).equals(plain)).toBe(true);
      expect(host.sent('chunk-get').length - gets).toBe(3);
      // Good at the third fetch: nothing to report.
      expect(host.sent('chunk-bad')).toHaveLength(reports);
      host.damageGets = 3;
      expect((await rejection(t.get(id))).code).toBe('chunk_corrupt');
      // Reported once, sealed with the key's proof (only a holder of the key has it dropped).
      const proof = 'key' in options ? { kc: key.check, kp: key.proof } : {};
      expect(host.sent('chunk-bad').slice(reports)).toEqual([
        { type: 'chunk-bad', ref: expect.any(Number), ids: [id], ...proof },
      ]);
      const up = { id, size: plain.length };
      host.damageGets = 3;
      const temp = join(dir, 'damaged.tmp');
      expect((await rejection(downloadFile(t, [up], temp))).code).toBe('chunk_corrupt');
      expect(existsSync(temp)).toBe(false);
    }
  });

  it('says chunk_missing for a chunk the host does not hold', async () => {
    const { t } = await transfer();
    const error = await rejection(t.get(await t.idOf(new Uint8Array([1, 2, 3]))));
    expect(error.code).toBe('chunk_missing');
  });

  it('surfaces store_full as the upload’s error', async () => {
    const { t } = await transfer();
    host.refusePuts = 'store_full';
    const error = await rejection(uploadFile(t, file('full.bin', randomBytes(2 * t.chunkBytes))));
    expect(error.code).toBe('store_full');
  });

  it('rejects the calls waiting when the connection drops, and works after the rejoin', async () => {
    const { t, connection } = await transfer();
    const plain = randomBytes(1000);
    const id = await t.idOf(plain);
    await t.put(id, plain);
    host.hold = true;
    const waiting = t.get(id);
    await eventually(() => host.sent('chunk-get').length === 1, 'the chunk-get');
    relay.connections[0]!.close(1011, 'gone');
    expect((await rejection(waiting)).code).toBe('not_joined');
    host.hold = false;
    host.release(); // to the closed socket: lost
    await eventually(() => connection.state === 'joined', 'the rejoin');
    expect(Buffer.from(await t.get(id)).equals(plain)).toBe(true);
    await connection.close();
    expect((await rejection(t.get(id))).code).toBe('closed');
  });

  it('sends a chunk frame the relay dropped again', async () => {
    const { t } = await transfer();
    host.dropFrames = 1;
    const plain = randomBytes(1000);
    await t.put(await t.idOf(plain), plain);
    expect(host.sent('chunk-put')).toHaveLength(2);
    expect(host.chunks.size).toBe(1);
  });

  it('asks chunk-have about at most 1000 ids at a time', async () => {
    const { t } = await transfer();
    const ids = await Promise.all(
      Array.from({ length: 2500 }, (_, i) => t.idOf(new TextEncoder().encode(`chunk ${i}`))),
    );
    const plain = new TextEncoder().encode('chunk 1234');
    await t.put(ids[1234]!, plain);
    expect([...(await t.held(ids))]).toEqual([ids[1234]]);
    expect(host.sent('chunk-have').map((f) => (f.ids as string[]).length)).toEqual([
      1000, 1000, 500,
    ]);
  });

  it('makes chunks whose frames fit a smaller maxMessageBytes', async () => {
    const { t } = await transfer({ maxMessageBytes: 65_536 });
    expect(t.chunkBytes).toBeLessThan(49_152);
    const up = await uploadFile(t, file('small.bin', randomBytes(3 * t.chunkBytes)));
    expect(up.chunks).toHaveLength(3);
    const longest = Math.max(...host.sent('chunk-put').map((f) => JSON.stringify(f).length));
    expect(longest).toBeLessThanOrEqual(65_536);
  });
});
