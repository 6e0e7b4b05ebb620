import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import type { RelayConnection } from '../../client/relay-connection.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { converged, openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** One edit: at a relative position, insert `text` or delete up to `length` characters. */
type Edit =
  | { device: number; at: number; insert: string }
  | { device: number; at: number; length: number };

function editArbitrary(devices: number): fc.Arbitrary<Edit> {
  const device = fc.integer({ min: 0, max: devices - 1 });
  const at = fc.double({ min: 0, max: 1, noNaN: true });
  return fc.oneof(
    fc.record({ device, at, insert: fc.string({ minLength: 1, maxLength: 8 }) }),
    fc.record({ device, at, length: fc.integer({ min: 1, max: 5 }) }),
  );
}

function applyEdit(provider: YjsProvider, edit: Edit): void {
  const text = provider.doc.getText('text');
  const index = Math.floor(edit.at * text.length);
  if ('insert' in edit) text.insert(index, edit.insert);
  else text.delete(index, Math.min(edit.length, text.length - index));
}

describe('Yjs provider through a real host', () => {
  let th: TestHost;
  let room: YjsRoom;
  /** Moves the host's clock forward (the relay's buffer window counts on it). */
  let clockOffsetMs = 0;
  /** One connection per device for the random-edit runs. */
  const shared: RelayConnection[] = [];

  beforeAll(async () => {
    th = await startTestHost({
      ui: false,
      relay: ['buffer.seconds=5'],
      now: () => Date.now() + clockOffsetMs,
    });
    room = await openYjsRoom(th, 'yjs@example.org', 'notes', 3);
    for (let i = 0; i < 3; i += 1) shared.push((await room.connect(i)).connection);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  for (const count of [2, 3]) {
    it(`makes ${count} devices converge on concurrent random edits`, async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(editArbitrary(count), { maxLength: 6 }), {
            minLength: 1,
            maxLength: 4,
          }),
          async (rounds) => {
            run += 1;
            const name = `random-${count}-${run}`;
            // Each run is a new document on the same connections (named documents in one room).
            const providers: YjsProvider[] = [];
            for (let i = 0; i < count; i += 1) {
              providers.push(await room.provider(i, { name, connection: shared[i] }));
            }
            await Promise.all(providers.map((p) => p.whenSynced()));
            // Each round's edits are made on every device before any of them can arrive.
            for (const edits of rounds) {
              for (const edit of edits) applyEdit(providers[edit.device]!, edit);
              await Promise.all(providers.map((p) => p.flush()));
            }
            const text = await converged(providers);
            // Nothing is lost: a fresh doc fed every device's state ends with the same text.
            const merged = new Y.Doc();
            for (const p of providers) Y.applyUpdate(merged, Y.encodeStateAsUpdate(p.doc));
            expect(merged.getText('text').toString()).toBe(text);
            for (const p of providers) p.destroy();
          },
        ),
        { numRuns: 20 },
      );
    });
  }

  it('brings back a device that was away past the buffer window and edited offline', async () => {
    const name = 'away';
    const a = await room.provider(0, { name });
    const b = await room.provider(1, { name });
    const awayDoc = new Y.Doc();
    const c = await room.provider(2, { name, doc: awayDoc });
    await Promise.all([a, b, c].map((p) => p.whenSynced()));
    a.doc.getText('text').insert(0, 'shared start. ');
    await converged([a, b, c]);

    // C drops without leaving: the relay buffers for it, then the window passes.
    c.destroy();
    await c.connection.close({ leave: false });
    a.doc.getText('text').insert(0, 'A while C was away. ');
    b.doc.getText('text').insert(b.doc.getText('text').length, ' B while C was away.');
    awayDoc.getText('text').insert(0, 'C offline. ');
    await Promise.all([a.flush(), b.flush()]);
    clockOffsetMs += 10_000;

    const { connection, joined } = await room.connect(2);
    // The relay dropped what it kept for C (the window passed): the sync steps bring it back.
    expect(joined.gap).toBe(true);
    const back = await room.provider(2, { name, doc: awayDoc, connection });
    const text = await converged([a, b, back]);
    expect(text).toContain('A while C was away.');
    expect(text).toContain('B while C was away.');
    expect(text).toContain('C offline.');
    expect(text).toContain('shared start.');
  });

  it('sends a state larger than message.maxBytes in pieces', async () => {
    const big = await startTestHost({ ui: false, relay: ['message.maxBytes=4096'] });
    const bigRoom = await openYjsRoom(big, 'big@example.org', 'big', 2);
    try {
      const a = await bigRoom.provider(0, { name: 'big', maxMessageBytes: 4096 });
      await a.whenSynced();
      const content = Array.from({ length: 4000 }, (_, i) => `line ${i}\n`).join('');
      a.doc.getText('text').insert(0, content); // one update of ~40 KiB: ten pieces or more
      const { connection: tap } = await bigRoom.connect(1, { maxMessageBytes: 4096 });
      const pieces: number[] = [];
      tap.on('message', ({ payload }) => {
        if (typeof payload.n === 'number') pieces.push(payload.n);
      });
      const b = await bigRoom.provider(1, { name: 'big', maxMessageBytes: 4096, connection: tap });
      expect(await converged([a, b])).toBe(content);
      expect(Math.max(...pieces)).toBeGreaterThan(9);
      expect(a.connection.state).toBe('joined'); // no frame was over the limit (that is 1009)
    } finally {
      await bigRoom.close();
      await big.close();
    }
  });

  it('removes the cursor of a device that leaves', async () => {
    const name = 'cursors';
    const a = await room.provider(0, { name });
    const b = await room.provider(1, { name });
    a.awareness.setLocalStateField('user', { name: 'A' });
    b.awareness.setLocalStateField('user', { name: 'B' });
    await eventually(
      () => a.awareness.getStates().get(b.doc.clientID)?.user?.name === 'B',
      'B at A',
    );
    await eventually(
      () => b.awareness.getStates().get(a.doc.clientID)?.user?.name === 'A',
      'A at B',
    );
    expect(a.peers).toContain(String(room.devices[1]!.deviceId));
    await b.connection.close({ leave: false });
    await eventually(() => !a.awareness.getStates().has(b.doc.clientID), 'B removed at A');
  });
});
