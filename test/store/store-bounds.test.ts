import { afterEach, describe, expect, it } from 'vitest';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { append, catchUp, entryText } from '../helpers/store-client.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** What one entry of `data` counts: its bytes plus 64, its sender's id and its kc. */
const counted = (data: string, device = '1') => data.length + 64 + device.length;

async function storeBytes(statusUrl: string): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  const match = /^sync_host_store_bytes (\d+)$/m.exec(text);
  if (match === null) throw new Error('no sync_host_store_bytes in /metrics');
  return Number(match[1]);
}

describe('the document store bounds (store.userMaxBytes, store.maxBytes)', () => {
  it('refuses appends past a user bound with store_full, keeps what it had, and live routing goes on', async () => {
    const entry = 'x'.repeat(100);
    harness = await startRelayHarness({
      config: { storeUserMaxBytes: 3 * counted(entry), storeMaxBytes: 100 * counted(entry) },
    });
    const room = harness.room(1);
    const { client: laptop } = await harness.joined(room, 1, 1);
    const { client: desktop } = await harness.joined(room, 1, 2);
    for (let ref = 1; ref <= 3; ref++) {
      expect(await append(laptop, 'notes.md', ref, entry)).toMatchObject({ type: 'appended' });
    }
    expect(await storeBytes(harness.statusUrl)).toBe(3 * counted(entry));
    const refused = await append(laptop, 'notes.md', 4, entry);
    expect(refused).toMatchObject({
      type: 'error',
      code: 'store_full',
      doc: 'notes.md',
      ref: 4,
    });
    expect(refused.message).toContain('store.userMaxBytes');
    // Another document of the same user is refused too; the connection stays open.
    expect(await append(laptop, 'other.md', 5, 'y')).toMatchObject({ code: 'store_full' });

    // Online devices keep syncing through the relay.
    laptop.send({ to: 'broadcast', payload: { y: 1, d: 'live' } });
    expect(await desktop.message()).toMatchObject({ from: 1, payload: { y: 1, d: 'live' } });

    // Nothing stored was lost, nothing refused was stored.
    const { entries, pos } = await catchUp(desktop, 'notes.md');
    expect(pos).toBe(3);
    expect(entries.map(entryText)).toEqual([entry, entry, entry]);
    expect(await catchUp(desktop, 'other.md')).toMatchObject({ entries: [], pos: 0 });
    expect(await storeBytes(harness.statusUrl)).toBe(3 * counted(entry));

    // Another user's share is untouched.
    const { client: other } = await harness.joined(harness.room(2), 2, 3);
    expect(await append(other, 'notes.md', 1, entry)).toMatchObject({ type: 'appended', pos: 1 });
  });

  it('refuses every user past store.maxBytes, and counts the bytes across a restart', async () => {
    const entry = 'z'.repeat(200);
    harness = await startRelayHarness({
      config: { storeUserMaxBytes: 100 * counted(entry), storeMaxBytes: 2 * counted(entry) },
    });
    const { client: first } = await harness.joined(harness.room(1), 1, 1);
    expect(await append(first, 'a', 1, entry)).toMatchObject({ type: 'appended' });
    const { client: second } = await harness.joined(harness.room(2), 2, 1);
    expect(await append(second, 'a', 1, entry)).toMatchObject({ type: 'appended' });
    const refused = await append(second, 'a', 2, entry);
    expect(refused).toMatchObject({ code: 'store_full', ref: 2 });
    expect(refused.message).toContain('store.maxBytes');

    const dir = harness.dir;
    await harness.close({ keepDir: true });
    harness = await startRelayHarness({
      dir,
      config: { storeUserMaxBytes: 100 * counted(entry), storeMaxBytes: 2 * counted(entry) },
    });
    expect(await storeBytes(harness.statusUrl)).toBe(2 * counted(entry));
    const { client: back } = await harness.joined(harness.room(1), 1, 1);
    expect(await append(back, 'a', 3, entry)).toMatchObject({ code: 'store_full' });
  });

  it('keeps the appends of one turn within the bound: the last ones are refused, in order', async () => {
    const entry = 'w'.repeat(50);
    harness = await startRelayHarness({
      config: { storeUserMaxBytes: 5 * counted(entry) },
    });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    const data = Buffer.from(entry).toString('base64');
    for (let ref = 1; ref <= 8; ref++) client.send({ type: 'append', doc: 'd', ref, data });
    const answers = [];
    for (let ref = 1; ref <= 8; ref++) {
      answers.push(await client.take((f) => f.ref === ref));
    }
    expect(answers.map((a) => a.type)).toEqual([
      ...Array(5).fill('appended'),
      ...Array(3).fill('error'),
    ]);
    // In the order of the appends, too.
    const order = client.frames.filter((f) => f.ref !== undefined).map((f) => f.ref);
    expect(order).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});
