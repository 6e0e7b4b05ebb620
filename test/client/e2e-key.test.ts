import { describe, expect, it } from 'vitest';
import { deriveE2EKey, open, seal } from '../../client/e2e-key.ts';

const encoder = new TextEncoder();
const room = '1.0123456789abcdef0123456789abcdef.0123456789abcdef0123456789abcdef';

describe('end-to-end keys (WebCrypto PBKDF2, HKDF, AES-GCM)', () => {
  it('derives the same key and check value from the same passphrase and room, and others otherwise', async () => {
    const one = await deriveE2EKey('correct horse', room);
    const again = await deriveE2EKey('correct horse', room);
    const otherPassphrase = await deriveE2EKey('correct horse!', room);
    const otherRoom = await deriveE2EKey('correct horse', `${room}0`);
    expect(one.check).toMatch(/^[0-9a-f]{16}$/);
    expect(again.check).toBe(one.check);
    expect(otherPassphrase.check).not.toBe(one.check);
    expect(otherRoom.check).not.toBe(one.check);
    const sealed = await seal(one, encoder.encode('hello'));
    expect(new TextDecoder().decode(await open(again, sealed as Uint8Array<ArrayBuffer>))).toBe(
      'hello',
    );
    expect(await open(otherPassphrase, sealed as Uint8Array<ArrayBuffer>)).toBeUndefined();
    expect(await open(otherRoom, sealed as Uint8Array<ArrayBuffer>)).toBeUndefined();
  });

  it('uses a fresh nonce per message and refuses an altered or truncated one', async () => {
    const key = await deriveE2EKey('pass', room, 1_000);
    const a = (await seal(key, encoder.encode('same text'))) as Uint8Array<ArrayBuffer>;
    const b = (await seal(key, encoder.encode('same text'))) as Uint8Array<ArrayBuffer>;
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    expect(Buffer.from(a.subarray(0, 12)).equals(Buffer.from(b.subarray(0, 12)))).toBe(false);
    for (const index of [0, 12, a.length - 1]) {
      const altered = a.slice();
      altered[index] = (altered[index] ?? 0) ^ 1;
      expect(await open(key, altered)).toBeUndefined();
    }
    expect(await open(key, a.slice(0, 20))).toBeUndefined();
  });

  it('refuses an empty passphrase', async () => {
    await expect(deriveE2EKey('', room)).rejects.toMatchObject({ code: 'invalid_passphrase' });
  });
});
