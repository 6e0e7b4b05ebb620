import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toBase64 } from '../../client/base64.ts';
import { DedupeEnvelope } from '../../client/dedupe-envelope.ts';
import { Outbox } from '../../client/outbox.ts';
import type { HostRequest } from '../../client/store-frames.ts';
import { decodeBinaryFrame } from '../../protocol/relay-frames.ts';

const outbox = (maxMessageBytes = 1_048_576, textBytes = false, binaryChunks = false) =>
  new Outbox(
    { maxMessageBytes, maxQueuedMessages: 100, dedupe: false, textBytes, binaryChunks },
    new DedupeEnvelope(),
  );

/** A pending frame's text, whether it is kept as a string or as its UTF-8 bytes. */
const textOf = (text: string | Uint8Array | undefined) =>
  typeof text === 'string' || text === undefined ? text : Buffer.from(text).toString('utf8');

/** The head of a chunk-put or append, in any shape the client makes (strings with escapes too). */
const heads = fc.oneof(
  fc.record({
    type: fc.constant('chunk-put' as const),
    ref: fc.nat(),
    id: fc.string(),
    kc: fc.option(fc.string(), { nil: undefined }),
    kp: fc.option(fc.string(), { nil: undefined }),
  }),
  fc.record({
    type: fc.constant('append' as const),
    doc: fc.string({ unit: 'grapheme' }),
    ref: fc.nat(),
    covers: fc.option(fc.nat(), { nil: undefined }),
    part: fc.option(fc.record({ m: fc.string(), i: fc.nat(), n: fc.nat() }), { nil: undefined }),
  }),
);

describe('a store frame whose data goes apart, in base64', () => {
  it('is the same text as the whole frame stringified, data last, as a string or as bytes', () => {
    fc.assert(
      fc.property(
        heads,
        // small data, and data of several pieces of the base64 writer (48 KiB each)
        fc.oneof(
          fc.uint8Array({ maxLength: 600 }),
          fc.integer({ min: 49_000, max: 160_000 }).map((n) => new Uint8Array(randomBytes(n))),
        ),
        fc.boolean(),
        (head, bytes, asBytes) => {
          const box = outbox(1_048_576, asBytes);
          const data = toBase64(bytes);
          box.store(head as unknown as HostRequest, bytes);
          const whole = JSON.stringify({ ...head, data });
          const text = box.pending.at(-1)?.text;
          expect(typeof text === 'string').toBe(!asBytes);
          expect(textOf(text)).toBe(whole);
          if (asBytes) expect((text as Uint8Array).length).toBe(Buffer.byteLength(whole));
          expect(Object.keys(JSON.parse(whole)).at(-1)).toBe('data');
        },
      ),
    );
  });

  it('is refused as message_too_big by the bytes of the whole frame, multibyte head included', () => {
    const head = { type: 'append', doc: 'é'.repeat(10), ref: 1 } as const;
    const raw = randomBytes(300);
    const bytes = Buffer.byteLength(JSON.stringify({ ...head, data: toBase64(raw) }));
    for (const asBytes of [false, true]) {
      outbox(bytes, asBytes).store(head as unknown as HostRequest, raw);
      const box = outbox(bytes - 1, asBytes);
      expect(() => box.store(head as unknown as HostRequest, raw)).toThrow(
        expect.objectContaining({ code: 'message_too_big' }),
      );
      expect(box.pending).toHaveLength(0);
    }
  });
});

describe('a chunk-put in the binary form', () => {
  it('decodes back to its members and its bytes; an append stays text', () => {
    fc.assert(
      fc.property(
        heads,
        fc.uint8Array({ maxLength: 2_000 }),
        fc.boolean(),
        (head, bytes, textBytes) => {
          const box = outbox(1_048_576, textBytes, true);
          box.store(head as unknown as HostRequest, bytes);
          const out = box.pending.at(-1)!;
          if (head.type === 'append') {
            expect(out.binary).toBeUndefined();
            expect(textOf(out.text)).toBe(JSON.stringify({ ...head, data: toBase64(bytes) }));
            return;
          }
          expect(out.binary).toBe(true);
          const frame = decodeBinaryFrame(out.text as Uint8Array);
          expect(frame?.header).toEqual(JSON.parse(JSON.stringify(head)));
          expect(Buffer.from(frame!.data).equals(Buffer.from(bytes))).toBe(true);
        },
      ),
    );
  });

  it('is refused as message_too_big by the bytes of the whole binary frame', () => {
    const head = { type: 'chunk-put', id: 'é'.repeat(10), ref: 1 } as const;
    const raw = randomBytes(300);
    const bytes = 4 + Buffer.byteLength(JSON.stringify(head)) + raw.length;
    outbox(bytes, true, true).store(head as unknown as HostRequest, raw);
    const box = outbox(bytes - 1, true, true);
    expect(() => box.store(head as unknown as HostRequest, raw)).toThrow(
      expect.objectContaining({ code: 'message_too_big' }),
    );
    expect(box.pending).toHaveLength(0);
  });
});
