import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  binaryFrameBytes,
  decodeBinaryFrame,
  encodeBinaryFrame,
  maxBinaryHeaderBytes,
} from '../../protocol/relay-frames.ts';
import { parseBinaryFrame } from '../../server/relay/messages.ts';

/**
 * The binary form of a chunk frame (4-byte big-endian length, JSON header, data), as client and
 * host both read and write it: what is written reads back the same, and any bytes at all are
 * read without throwing, into a header of the form's rules or nothing.
 */

/** A header as a client or host writes one: a type, and members of any JSON value but `data`. */
const headers = fc
  .tuple(
    fc.string({ unit: 'grapheme' }),
    fc.dictionary(
      fc.string({ unit: 'grapheme' }).filter((key) => key !== 'data' && key !== 'type'),
      fc.jsonValue(),
      { maxKeys: 5 },
    ),
  )
  .map(([type, members]) => ({ ...members, type }))
  .filter((header) => binaryFrameBytes(header, 0) - 4 <= maxBinaryHeaderBytes);

describe('the binary form of a chunk frame', () => {
  it('reads back the header and the data it was written with', () => {
    fc.assert(
      fc.property(headers, fc.uint8Array({ maxLength: 3000 }), (header, data) => {
        const frame = encodeBinaryFrame(header, data);
        expect(frame.length).toBe(binaryFrameBytes(header, data.length));
        const read = decodeBinaryFrame(frame);
        expect(read?.header).toEqual(JSON.parse(JSON.stringify(header)));
        expect(Buffer.from(read!.data).equals(Buffer.from(data))).toBe(true);
      }),
    );
  });

  it('reads any bytes without throwing: a header by the rules of the form, or nothing', () => {
    const lengths = fc.oneof(fc.nat({ max: 64 }), fc.nat());
    const frames = fc.oneof(
      fc.uint8Array({ maxLength: 200 }),
      fc.tuple(lengths, fc.json(), fc.uint8Array({ maxLength: 50 })).map(([n, json, rest]) => {
        const head = Buffer.from(json);
        const length = Buffer.alloc(4);
        length.writeUInt32BE(n % 2 === 0 ? head.length : n);
        return new Uint8Array(Buffer.concat([length, head, rest]));
      }),
    );
    fc.assert(
      fc.property(frames, (frame) => {
        const read = decodeBinaryFrame(frame);
        if (read === undefined) return;
        expect(typeof read.header.type).toBe('string');
        expect('data' in read.header).toBe(false);
        const n = Buffer.from(frame).readUInt32BE(0);
        expect(n).toBeLessThanOrEqual(maxBinaryHeaderBytes);
        expect(read.data.length).toBe(frame.length - 4 - n);
        // The relay takes a chunk-put and nothing else; it never throws either.
        const parsed = parseBinaryFrame(Buffer.from(frame));
        if (read.header.type !== 'chunk-put') expect(parsed).toBeUndefined();
        else expect(parsed?.type).toMatch(/^(chunk-put|invalid_message)$/);
      }),
    );
  });
});
