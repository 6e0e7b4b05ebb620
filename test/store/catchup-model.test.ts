import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricAt } from '../helpers/metrics.ts';
import { type Frame, type RelayClient, tcpOf } from '../helpers/relay-client.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { b64, entryText } from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * Catch-ups against a model: whatever a device asks at once, of which documents, from where, and
 * whether it reads meanwhile or drops, each catch-up is answered whole (its pages, then
 * `caughtup`) before the next one of the connection, with exactly what the host holds after its
 * `after`; a dropped connection's catch-ups are forgotten, and nothing stays held.
 */

const pageBytes = 2048;
const docs = ['a', 'b', 'c', 'd'];

type Step =
  | { kind: 'append'; doc: number; sizes: number[] }
  | { kind: 'ask'; asks: { doc: number; after: number }[]; paused: boolean; drop: boolean };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('append' as const),
    doc: fc.integer({ min: 0, max: 2 }),
    sizes: fc.array(fc.integer({ min: 1, max: 1400 }), { minLength: 1, maxLength: 6 }),
  }),
  fc.record({
    kind: fc.constant('ask' as const),
    asks: fc.array(
      fc.record({ doc: fc.integer({ min: 0, max: 3 }), after: fc.integer({ min: 0, max: 12 }) }),
      { minLength: 1, maxLength: 8 },
    ),
    paused: fc.boolean(),
    drop: fc.boolean(),
  }),
);

let harness: RelayHarness;
let user = 0;

beforeAll(async () => {
  harness = await startRelayHarness({
    config: {
      messageMaxBytes: pageBytes,
      maxQueuedBytes: 2 * pageBytes,
      ratePerSecond: 100_000,
      rateBurst: 100_000,
    },
  });
});

afterAll(async () => {
  await harness.close();
});

/** The text appended as entry `n` of a document, `size` bytes long. */
const textOf = (doc: number, n: number, size: number) => `${doc}:${n}:`.padEnd(size, 'x');

/** The answers to `asks` as the model says, page boundaries aside: entries then `caughtup`. */
function expected(model: string[][], asks: { doc: number; after: number }[]) {
  return asks.map(({ doc, after }) => {
    const held = model[doc] ?? [];
    const entries = held.slice(after).map((text, i) => ({ pos: after + i + 1, text }));
    return { doc: docs[doc], entries, pos: held.length };
  });
}

/** The answers received from `from` on, grouped per catch-up (pages up to its `caughtup`). */
function received(frames: Frame[]) {
  const answers: { doc: unknown; entries: { pos: unknown; text: string }[]; pos: unknown }[] = [];
  let entries: { pos: unknown; text: string }[] = [];
  let doc: unknown;
  for (const frame of frames) {
    if (frame.type === 'stored') {
      // every page of one catch-up names its document: another one's page would be interleaved
      if (doc !== undefined && doc !== frame.doc) throw new Error('pages of two catch-ups mixed');
      doc = frame.doc;
      for (const e of frame.entries as Frame[]) entries.push({ pos: e.pos, text: entryText(e) });
    } else if (frame.type === 'caughtup') {
      if (doc !== undefined && doc !== frame.doc) throw new Error('pages of two catch-ups mixed');
      answers.push({ doc: frame.doc, entries, pos: frame.pos });
      entries = [];
      doc = undefined;
    }
  }
  return answers;
}

async function reader(room: string, device: number): Promise<RelayClient> {
  return (await harness.joined(room, user, device)).client;
}

describe('catch-ups against a model', () => {
  it('answer each catch-up whole and in order, whatever is asked at once, read late or dropped', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), async (steps) => {
        user++;
        const room = harness.room(user);
        const writer = (await harness.joined(room, user, 1)).client;
        let device = 2;
        let client = await reader(room, device);
        const model: string[][] = [[], [], []];
        let ref = 0;
        for (const s of steps) {
          if (s.kind === 'append') {
            const held = model[s.doc] as string[];
            for (const size of s.sizes) {
              const text = textOf(s.doc, held.length + 1, size);
              held.push(text);
              writer.send({ type: 'append', doc: docs[s.doc], ref: ++ref, data: b64(text) });
            }
            const last = ref;
            await writer.take((f) => f.type === 'appended' && f.ref === last);
            continue;
          }
          const from = client.frames.length;
          if (s.paused) tcpOf(client).pause();
          for (const { doc, after } of s.asks) {
            client.send({ type: 'catchup', doc: docs[doc], after });
          }
          if (s.drop) {
            // dropped while its catch-ups are being answered: they are forgotten
            client.terminate();
            client = await reader(room, ++device);
            continue;
          }
          if (s.paused) tcpOf(client).resume();
          for (let i = 0; i < s.asks.length; i++) await client.next('caughtup');
          const pages = client.texts.slice(from).filter((t) => t.startsWith('{"type":"stored"'));
          for (const page of pages) expect(Buffer.byteLength(page)).toBeLessThanOrEqual(pageBytes);
          expect(received(client.frames.slice(from))).toEqual(expected(model, s.asks));
        }
        const { statusUrl } = harness;
        await eventually(
          async () => (await metricAt(statusUrl, 'sync_host_store_catchups_pending')) === 0,
          'every catch-up answered or forgotten',
        );
        expect(await metricAt(statusUrl, 'relay_unsent_bytes')).toBe(0);
        client.terminate();
        writer.terminate();
      }),
      { numRuns: 100 },
    );
  }, 120_000);
});
