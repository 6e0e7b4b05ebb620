import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { StoreCursor } from '../../client/yjs-store-cursor.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { openYjsRoom, type YjsRoom } from './yjs-room.ts';

/**
 * A model of devices that come and go and are never online together: each session of a device
 * catches up from the host alone, edits, and leaves; some edits are made offline, between
 * sessions; a session may start without the place the device kept (a run killed before it
 * saved it). In the end every device, opened once more, holds the same document.
 */

const devices = 3;
/** Runs per `npm test`; `STORE_MODEL_RUNS` sets more (each run is a few sessions over the host). */
const runs = Number(process.env.STORE_MODEL_RUNS ?? 40);

/** One step: a device edits offline, or runs a session (join, catch up, edit, leave). */
type Step =
  | { kind: 'offline'; device: number; edits: Edit[] }
  | { kind: 'session'; device: number; edits: Edit[]; keepPlace: boolean };

/**
 * A keystroke-sized insert or delete; now and then a bulk insert of 200 to 600 KiB or the whole
 * text cleared, so the entries since a snapshot pass 1 MiB and weigh more or less than the state
 * (the two sides of when a device writes a snapshot).
 */
type Edit =
  | { at: number; insert: string }
  | { at: number; length: number }
  | { at: number; bulk: number }
  | { clear: true };

const editArbitrary: fc.Arbitrary<Edit> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      insert: fc.stringMatching(/^[a-z]{1,6} $/),
    }),
  },
  {
    weight: 10,
    arbitrary: fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      length: fc.integer({ min: 1, max: 4 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      bulk: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ clear: true as const }) },
);

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('offline' as const),
    device: fc.integer({ min: 0, max: devices - 1 }),
    edits: fc.array(editArbitrary, { minLength: 1, maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('session' as const),
    device: fc.integer({ min: 0, max: devices - 1 }),
    edits: fc.array(editArbitrary, { maxLength: 6 }),
    keepPlace: fc.boolean(),
  }),
);

/** 200 KiB of lines; a bulk insert is 1 to 3 of them. */
const bulkLines = 'a line of a pasted document\n'.repeat(7_500);

function applyEdit(doc: Y.Doc, edit: Edit): void {
  const text = doc.getText('text');
  if ('clear' in edit) {
    text.delete(0, text.length);
    return;
  }
  const index = Math.floor(edit.at * text.length);
  if ('insert' in edit) text.insert(index, edit.insert);
  else if ('bulk' in edit) text.insert(index, bulkLines.repeat(edit.bulk));
  else text.delete(index, Math.min(edit.length, text.length - index));
}

describe('devices that are never online together converge through the host (model)', () => {
  let th: TestHost;
  let room: YjsRoom;

  beforeAll(async () => {
    th = await startTestHost({ ui: false, relay: ['buffer.seconds=2'] });
    room = await openYjsRoom(th, 'model@example.org', 'model', devices);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  it(
    'converges whatever the order of sessions and offline edits',
    async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 8 }), async (steps) => {
          run += 1;
          const name = `model-${run}`;
          const docs = Array.from({ length: devices }, () => new Y.Doc());
          const places = Array.from({ length: devices }, () => new StoreCursor());
          /** One session of `device` alone: it catches up, edits, waits for the host, leaves. */
          const session = async (device: number, edits: Edit[], keepPlace: boolean) => {
            const { connection } = await room.connect(device);
            const store = keepPlace ? places[device] : new StoreCursor();
            const provider = await room.provider(device, {
              connection,
              name,
              doc: docs[device],
              store,
            });
            await provider.whenSynced();
            for (const edit of edits) applyEdit(docs[device]!, edit);
            await provider.flush();
            provider.destroy();
            await connection.close();
          };
          for (const step of steps) {
            if (step.kind === 'offline') {
              for (const edit of step.edits) applyEdit(docs[step.device]!, edit);
            } else {
              await session(step.device, step.edits, step.keepPlace);
            }
          }
          // Each device once more, twice round, so the last one's edits reach the first.
          for (let round = 0; round < 2; round += 1) {
            for (let device = 0; device < devices; device += 1) await session(device, [], true);
          }
          const texts = docs.map((doc) => doc.getText('text').toString());
          expect(new Set(texts).size).toBe(1);
          const vectors = docs.map((doc) => Y.encodeStateVector(doc).join(','));
          expect(new Set(vectors).size).toBe(1);
        }),
        { numRuns: runs },
      );
    },
    Math.max(120_000, runs * 3_000),
  );
});
