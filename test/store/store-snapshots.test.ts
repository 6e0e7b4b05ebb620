import { afterEach, describe, expect, it } from 'vitest';
import type { RelayClient } from '../helpers/relay-client.ts';
import { createTestClock, type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { append, catchUp, entryText, testKey } from '../helpers/store-client.ts';

/** Two keys of one project (two passphrases): entries filed under each check value. */
const key = { A: testKey('A'), B: testKey('B') };

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const minuteMs = 60_000;

/** The texts a catch-up sends, in order. */
async function caughtUp(
  client: RelayClient,
  after: number,
  extra: Record<string, unknown> = {},
): Promise<string[]> {
  return (await catchUp(client, 'notes.md', after, extra)).entries.map(entryText);
}

/** Appends `texts` in order, each with `extra`, and waits for every answer. */
async function appendAll(
  client: RelayClient,
  texts: string[],
  extra: Record<string, unknown> = {},
): Promise<void> {
  for (const text of texts) {
    const answer = await append(client, 'notes.md', Math.floor(Math.random() * 1e9), text, extra);
    if (answer.type !== 'appended') throw new Error(`refused: ${JSON.stringify(answer)}`);
  }
}

describe('snapshots in catch-up and compaction through the relay', () => {
  it('sends the newest snapshot of the requester kc first, then what follows it', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    await appendAll(client, ['a1', 'a2'], { ...key.A });
    await appendAll(client, ['b3'], { ...key.B });
    await appendAll(client, ['snapA'], { ...key.A, covers: 3 });
    await appendAll(client, ['a5'], { ...key.A });
    await appendAll(client, ['b6'], { ...key.B });
    expect(await caughtUp(client, 0, { ...key.A })).toEqual(['snapA', 'a5', 'b6']);
    // Already past what the snapshot covers: the entries in order.
    expect(await caughtUp(client, 3, { ...key.A })).toEqual(['snapA', 'a5', 'b6']);
    // Another key, or none: no snapshot of its own, everything in order.
    expect(await caughtUp(client, 0, { ...key.B })).toEqual([
      'a1',
      'a2',
      'b3',
      'snapA',
      'a5',
      'b6',
    ]);
    expect(await caughtUp(client, 0)).toEqual(['a1', 'a2', 'b3', 'snapA', 'a5', 'b6']);
    // A snapshot that did not open: ask for the raw entries.
    expect(await caughtUp(client, 0, { ...key.A, snapshots: false })).toEqual([
      'a1',
      'a2',
      'b3',
      'snapA',
      'a5',
      'b6',
    ]);
    expect((await catchUp(client, 'notes.md', 0, { ...key.A })).pos).toBe(6);
  });

  it('sends a snapshot in pieces whole and first, once every piece is stored', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    await appendAll(client, ['e1', 'e2']);
    await appendAll(client, ['s-0'], { covers: 2, part: { m: 'snap', i: 0, n: 2 } });
    await appendAll(client, ['e4']);
    expect(await caughtUp(client, 0)).toEqual(['e1', 'e2', 's-0', 'e4']);
    await appendAll(client, ['s-1'], { covers: 2, part: { m: 'snap', i: 1, n: 2 } });
    const { entries } = await catchUp(client, 'notes.md', 0);
    expect(entries.map(entryText)).toEqual(['s-0', 's-1', 'e4']);
    expect(entries[1]).toMatchObject({ covers: 2, part: { m: 'snap', i: 1, n: 2 } });
  });

  it('drops what a snapshot covers once its history step is over, and never what another kc wrote', async () => {
    harness = await startRelayHarness();
    const { client } = await harness.joined(harness.room(1), 1, 1);
    await appendAll(client, ['a1', 'a2'], { ...key.A });
    await appendAll(client, ['b3'], { ...key.B });
    // A device with another key claims to stand for everything: it drops nothing of A's.
    await appendAll(client, ['snapB'], { ...key.B, covers: 3 });
    await appendAll(client, ['snapA'], { ...key.A, covers: 4 });
    await harness.relay.sweepStore();
    expect(await caughtUp(client, 0, { snapshots: false })).toHaveLength(5);

    harness.clock.advance(11 * minuteMs);
    await harness.relay.sweepStore();
    expect(await caughtUp(client, 0, { snapshots: false })).toEqual(['snapB', 'snapA']);
    expect(await caughtUp(client, 0, { ...key.A })).toEqual(['snapA']);
    // Positions are never given twice.
    expect(await append(client, 'notes.md', 99, 'a6', { ...key.A })).toMatchObject({ pos: 6 });
  });

  it('drops entries stored at different moments of one history step', async () => {
    // At the start of a step, so that the moments below all fall in it.
    const stepMs = 10 * minuteMs;
    harness = await startRelayHarness({
      clock: createTestClock(Math.ceil(Date.now() / stepMs) * stepMs + 1_000),
    });
    const { client } = await harness.joined(harness.room(1), 1, 1);
    for (const text of ['k1', 'k2', 'k3']) {
      await appendAll(client, [text]);
      harness.clock.advance(1_234);
    }
    await appendAll(client, ['snap'], { covers: 3 });
    harness.clock.advance(11 * minuteMs);
    await harness.relay.sweepStore();
    expect(await caughtUp(client, 0, { snapshots: false })).toEqual(['snap']);
  });
});
