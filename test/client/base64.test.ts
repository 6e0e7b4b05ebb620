import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  fromBase64,
  portableFromBase64,
  portableToBase64,
  toBase64,
  toBase64Url,
} from '../../client/base64.ts';

/** Views into a larger buffer too: an encoder must take the view's bytes, not its buffer's. */
function samples(): Uint8Array[] {
  const list: Uint8Array[] = [];
  for (let length = 0; length <= 70; length += 1) list.push(new Uint8Array(randomBytes(length)));
  list.push(new Uint8Array(randomBytes(262_144)), new Uint8Array(randomBytes(1_000_001)));
  const backing = new Uint8Array(randomBytes(1_000));
  list.push(backing.subarray(3, 500), backing.subarray(999));
  return list;
}

function sameBytes(decoded: Uint8Array | undefined, bytes: Uint8Array): boolean {
  return decoded instanceof Uint8Array && Buffer.from(decoded).equals(Buffer.from(bytes));
}

describe('base64', () => {
  it('encodes every length as Node does, with the engine encoder and without, and decodes it back', () => {
    for (const bytes of samples()) {
      const expected = Buffer.from(bytes).toString('base64');
      expect(toBase64(bytes)).toBe(expected);
      expect(portableToBase64(bytes)).toBe(expected);
      // Compared as buffers: a deep equality over a megabyte's elements took most of 20 s on a
      // loaded machine.
      expect(sameBytes(fromBase64(expected), bytes)).toBe(true);
      expect(sameBytes(portableFromBase64(expected), bytes)).toBe(true);
      expect(toBase64Url(bytes)).toBe(Buffer.from(bytes).toString('base64url'));
    }
  });

  it('decodes to bytes of their own, not a view into a shared pool', () => {
    const decoded = fromBase64('QUJD');
    expect(decoded?.buffer.byteLength).toBe(3);
    expect(decoded).toEqual(new Uint8Array([0x41, 0x42, 0x43]));
  });

  it('decodes text that is not canonical as atob does, and refuses what atob refuses', () => {
    for (const text of ['QR==', 'QQ', ' QUJD', 'QU JD', '-_-_', 'ŁŁŁŁ', 'Q===', '====']) {
      expect(fromBase64(text), text).toEqual(portableFromBase64(text));
    }
    expect(fromBase64('QR==')).toEqual(new Uint8Array([0x41]));
    expect(fromBase64('ŁŁŁŁ')).toBeUndefined();
  });

  it('encodes base64url without padding and refuses text that is not base64', () => {
    const bytes = new Uint8Array([0xfb, 0xff, 0xfe, 0x01]);
    expect(toBase64Url(bytes)).toBe('-__-AQ');
    expect(fromBase64('not base64!')).toBeUndefined();
  });
});
