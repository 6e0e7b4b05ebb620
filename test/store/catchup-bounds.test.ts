import { afterEach, describe, expect, it } from 'vitest';
import type { Repeat } from '../../server/relay/relay.ts';
import { metricAt } from '../helpers/metrics.ts';
import { type Frame, tcpOf } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { catchUp } from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** The relay's periodic tasks never run: a client that does not read is not cut by the heartbeat. */
const never: Repeat = () => () => {};

const pageBytes = 64 * 1024;
const maxQueuedBytes = 512 * 1024;
/** Entries of the large document: 400 of 40 KiB, 16 MiB, far more than the sockets can hold. */
const bigEntries = 400;
const entryData = Buffer.alloc(40 * 1024, 7).toString('base64');
/** Catch-ups a connection may have waiting behind the one being answered. */
const waitingBound = 256;

describe('catch-ups of a connection that does not read', () => {
  it('are answered one at a time from a bounded line, within relay.maxQueuedBytes, the rest refused', async () => {
    harness = await startRelayHarness({
      repeat: never,
      config: {
        messageMaxBytes: pageBytes,
        maxQueuedBytes,
        maxMemoryBytes: 4 * maxQueuedBytes,
        ratePerSecond: 100_000,
        rateBurst: 100_000,
      },
    });
    const { statusUrl } = harness;
    const room = harness.room(1);
    const writer = (await harness.joined(room, 1, 1)).client;
    for (let ref = 1; ref <= bigEntries; ref++) {
      writer.send({ type: 'append', doc: 'big', ref, data: entryData });
    }
    await writer.take((f) => f.type === 'appended' && f.ref === bigEntries, 30_000);

    const reader = (await harness.joined(room, 1, 2)).client;
    tcpOf(reader).pause();
    reader.send({ type: 'catchup', doc: 'big', after: 0 });
    // its pages fill the sockets: what is unsent to it comes near half of its bound, and stays
    await eventually(
      async () =>
        (await metricAt(statusUrl, 'relay_unsent_bytes')) >= maxQueuedBytes / 2 - pageBytes,
      'the reader behind',
      10_000,
    );
    const flood = 299;
    for (let i = 1; i <= flood; i++) reader.send({ type: 'catchup', doc: `empty-${i}`, after: 0 });
    const refused = flood - waitingBound;
    await eventually(
      async () => (await metricAt(statusUrl, 'sync_host_store_catchups_refused_total')) === refused,
      'the flood refused beyond the line',
      10_000,
    );
    expect(await metricAt(statusUrl, 'sync_host_store_catchups_pending')).toBe(waitingBound + 1);
    // held pages count with the unsent bytes, and stay within the receiver's bound
    expect(await metricAt(statusUrl, 'relay_unsent_bytes')).toBeLessThanOrEqual(maxQueuedBytes);
    const health = await fetch(`${statusUrl}/health`);
    expect(health.status).toBe(200);
    expect(reader.closeInfo).toBeUndefined();

    // reading again, it gets every catch-up it was not refused, whole and in the order asked
    tcpOf(reader).resume();
    await reader.take((f) => f.type === 'caughtup' && f.doc === `empty-${waitingBound}`, 30_000);
    const answers = reader.frames.filter((f) => f.type === 'stored' || f.type === 'caughtup');
    const bigDone = answers.findIndex((f) => f.type === 'caughtup' && f.doc === 'big');
    const bigPages = answers.slice(0, bigDone);
    expect(bigPages.every((f) => f.type === 'stored' && f.doc === 'big')).toBe(true);
    const positions = bigPages.flatMap((f) => (f.entries as Frame[]).map((e) => e.pos));
    expect(positions).toEqual(Array.from({ length: bigEntries }, (_, i) => i + 1));
    expect(answers.slice(bigDone + 1)).toEqual(
      Array.from({ length: waitingBound }, (_, i) => ({
        type: 'caughtup',
        doc: `empty-${i + 1}`,
        pos: 0,
      })),
    );
    // the refused ones were dropped: no answer but, at most, their rate_limited error
    for (const frame of reader.frames.filter((f) => f.type === 'error')) {
      expect(frame).toMatchObject({ code: 'rate_limited' });
      expect(Number((frame.doc as string).slice('empty-'.length))).toBeGreaterThan(waitingBound);
    }
    await eventually(
      async () => (await metricAt(statusUrl, 'sync_host_store_catchups_pending')) === 0,
      'every catch-up answered',
    );
    // the line is free again: a new catch-up is answered
    expect(await catchUp(reader, 'empty-1')).toMatchObject({ entries: [], pos: 0 });
  }, 90_000);
});
