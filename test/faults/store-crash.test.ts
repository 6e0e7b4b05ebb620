import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { writeLoopbackRelayConf } from '../helpers/configs.ts';
import { startHostProcess } from '../helpers/host-process.ts';
import { catchUp, chunkCall, entryText, plainId } from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';
import { useCrashFixture } from './crash-fixture.ts';

const secret = 'store-crash-test-secret-0123456789abcdef';
const { dirs, processes, token, connect } = useCrashFixture(secret);

describe('relay killed with -9 during appends to the document store', () => {
  it('keeps every acknowledged entry, in order, and the file passes integrity_check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-crash-'));
    dirs.push(dir);
    writeLoopbackRelayConf(dir, secret, { 'rate.perSecond': 100_000, 'rate.burst': 100_000 });
    const room = createRoomId(1, secret);
    const relay = await startHostProcess(['relay'], dir);
    processes.push(relay);
    const writer = connect(await relay.url('relay'));
    expect(await writer.join(room, 1, token(1, 1))).toMatchObject({ type: 'joined' });

    // Appends in bursts, without waiting for their acknowledgements.
    let sent = 0;
    let sending = true;
    const load = (async () => {
      while (sending && writer.closeInfo === undefined) {
        for (let i = 0; i < 100; i++) {
          const data = Buffer.from(`entry ${sent}`).toString('base64');
          writer.send({ type: 'append', doc: 'notes.md', ref: sent, data });
          sent++;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const acked = () => writer.frames.filter((f) => f.type === 'appended');
    await eventually(() => acked().length > 2_000, 'thousands of acknowledged appends', 15_000);
    expect(await relay.stop('SIGKILL')).toBeNull();
    sending = false;
    await load;
    const acknowledged = acked();
    // Acknowledgements of one connection come in append order, positions growing with them.
    expect(acknowledged.map((f) => f.ref)).toEqual(acknowledged.map((_, i) => i));
    expect(acknowledged.map((f) => f.pos)).toEqual(acknowledged.map((_, i) => i + 1));

    const db = new Database(join(dir, 'store.db'));
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();

    const again = await startHostProcess(['relay'], dir);
    processes.push(again);
    const reader = connect(await again.url('relay'));
    expect(await reader.join(room, 2, token(1, 2))).toMatchObject({ type: 'joined' });
    const { entries, pos } = await catchUp(reader, 'notes.md');
    expect(entries.length).toBeGreaterThanOrEqual(acknowledged.length);
    expect(entries.length).toBeLessThanOrEqual(sent);
    expect(pos).toBe(entries.length);
    const texts = entries.map(entryText);
    expect(texts).toEqual(entries.map((_, i) => `entry ${i}`));
  }, 60_000);

  it('keeps every chunk it answered chunk-stored for', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-crash-chunks-'));
    dirs.push(dir);
    writeLoopbackRelayConf(dir, secret, { 'rate.perSecond': 100_000, 'rate.burst': 100_000 });
    const room = createRoomId(1, secret);
    const relay = await startHostProcess(['relay'], dir);
    processes.push(relay);
    const writer = connect(await relay.url('relay'));
    expect(await writer.join(room, 1, token(1, 1))).toMatchObject({ type: 'joined' });
    // Chunks of 4 KiB, each its index and a comma repeated, without waiting for their answers.
    const chunkOf = (i: number) => Buffer.alloc(4096, `${i},`);
    let sent = 0;
    let sending = true;
    const load = (async () => {
      while (sending && writer.closeInfo === undefined) {
        for (let i = 0; i < 50; i++) {
          const data = chunkOf(sent);
          writer.send({
            type: 'chunk-put',
            ref: sent,
            id: plainId(data),
            data: data.toString('base64'),
          });
          sent++;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const stored = () => writer.frames.filter((f) => f.type === 'chunk-stored');
    await eventually(() => stored().length > 1_000, 'a thousand stored chunks', 15_000);
    expect(await relay.stop('SIGKILL')).toBeNull();
    sending = false;
    await load;
    const ids = stored().map((f) => f.id as string);

    const again = await startHostProcess(['relay'], dir);
    processes.push(again);
    const reader = connect(await again.url('relay'));
    expect(await reader.join(room, 2, token(1, 2))).toMatchObject({ type: 'joined' });
    let ref = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      const asked = ids.slice(i, i + 1000);
      const held = await chunkCall(reader, { type: 'chunk-have', ref: ref++, ids: asked });
      expect(held.ids).toEqual(asked);
    }
    const last = stored().at(-1);
    const got = await chunkCall(reader, { type: 'chunk-get', ref: ref++, id: last?.id });
    expect(Buffer.from(got.data as string, 'base64').equals(chunkOf(last?.ref as number))).toBe(
      true,
    );
  }, 60_000);
});
