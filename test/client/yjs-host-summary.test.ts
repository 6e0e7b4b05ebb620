import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { docKeyOf, hmacSha256 } from '../../client/doc-key.ts';
import { deriveE2EKey } from '../../client/e2e-key.ts';
import { HostSummary } from '../../client/yjs-host-summary.ts';

type Edit = { at: number; insert: string } | { at: number; length: number };

const edits = fc.array(
  fc.oneof(
    fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      insert: fc.string({ minLength: 1, maxLength: 5 }),
    }),
    fc.record({
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      length: fc.integer({ min: 1, max: 4 }),
    }),
  ),
  { maxLength: 8 },
);

function apply(doc: Y.Doc, list: Edit[]): void {
  const text = doc.getText('text');
  for (const edit of list) {
    const index = Math.floor(edit.at * text.length);
    if ('insert' in edit) text.insert(index, edit.insert);
    else text.delete(index, Math.min(edit.length, text.length - index));
  }
}

describe('what the host holds of a document (HostSummary)', () => {
  it('finds what a device made beyond the host, deletions included (fast-check)', () => {
    fc.assert(
      fc.property(edits, edits, fc.boolean(), (shared, offline, throughJson) => {
        const device = new Y.Doc();
        apply(device, shared);
        // The host holds the shared part, and the summary says so.
        const host = new Y.Doc();
        Y.applyUpdate(host, Y.encodeStateAsUpdate(device));
        let summary = new HostSummary();
        summary.add(Y.encodeStateAsUpdate(device));
        if (throughJson) summary = new HostSummary(JSON.parse(JSON.stringify(summary.toJSON())));
        expect(summary.missing(device)).toBeUndefined();
        apply(device, offline);
        const missing = summary.missing(device);
        // A deletion alone changes the text but not the state vector: it must be found too.
        if (missing !== undefined) Y.applyUpdate(host, missing);
        expect(host.getText('text').toString()).toBe(device.getText('text').toString());
        expect(Y.encodeStateVector(host)).toEqual(Y.encodeStateVector(device));
      }),
      { numRuns: 300 },
    );
  });
});

describe('document names on the wire (docKeyOf)', () => {
  it('is HMAC-SHA-256 (checked against node:crypto) and hides the name only with a key', async () => {
    for (const [key, message] of [
      [new Uint8Array(32).fill(1), 'notes.md'],
      [new Uint8Array(0), ''],
      [new Uint8Array(64).fill(255), 'x'.repeat(200)],
    ] as const) {
      const expected = createHmac('sha256', key).update(message).digest();
      expect(Buffer.from(hmacSha256(key, new TextEncoder().encode(message)))).toEqual(expected);
    }
    const one = await deriveE2EKey('one passphrase', 'room-a', 1000);
    const other = await deriveE2EKey('another passphrase', 'room-a', 1000);
    expect(docKeyOf('files', undefined)).toBe('files');
    expect(docKeyOf('files', one)).toMatch(/^h[\w-]{43}$/);
    expect(docKeyOf('files', one)).toBe(docKeyOf('files', one));
    expect(docKeyOf('files', one)).not.toBe(docKeyOf('files', other));
    expect(docKeyOf('files', one)).not.toBe(docKeyOf('notes.md', one));
  });
});
