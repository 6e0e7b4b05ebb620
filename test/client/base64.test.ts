import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fromBase64, toBase64, toBase64Url } from '../../client/base64.ts';

describe('the client’s base64', () => {
  it('encodes every length as Node does, and decodes it back', () => {
    for (const length of [...Array.from({ length: 70 }, (_, i) => i), 262_144, 1_000_001]) {
      const bytes = randomBytes(length);
      const text = toBase64(bytes);
      expect(text).toBe(bytes.toString('base64'));
      expect(Buffer.from(fromBase64(text)!).equals(bytes)).toBe(true);
      expect(toBase64Url(bytes)).toBe(bytes.toString('base64url'));
    }
  });

  it('says a text that is not base64 is not', () => {
    expect(fromBase64('not base64!')).toBeUndefined();
  });
});
