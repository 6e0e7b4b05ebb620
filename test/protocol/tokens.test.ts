import { describe, expect, it } from 'vitest';
import { parseDeviceToken } from '../../protocol/device-token.ts';
import { djb2, doubleDjb2 } from '../../server/hashing.ts';
import {
  createRoomId,
  signDeviceToken,
  verifyDeviceToken,
  verifyRoomId,
} from '../../server/tokens.ts';

// Vectors computed independently (Python, docs/tokens.md) and published for client authors.
describe('djb2', () => {
  it.each([
    ['', 0x00001505],
    ['a', 0x0002b606],
    ['hello', 0x0f923099],
    ['hello world', 0x3551c8c1],
    ['héllo ☃', 0x09a537dd],
    ['The quick brown fox jumps over the lazy dog', 0x34cc38de],
  ])('hashes %j over its UTF-8 bytes modulo 2^32', (text, expected) => {
    expect(djb2(text)).toBe(expected);
  });

  it.each([
    ['secret', '1:2:1700000000', '440b6b9d'],
    ['correct horse battery staple', '42:7:1767225600', '7c5956d7'],
    ['', '1:1:0', 'e45be3cc'],
  ])(
    'computes the double-djb2 keyed hash for secret %j and payload %j',
    (secret, payload, expected) => {
      expect(doubleDjb2(secret, payload)).toBe(expected);
    },
  );
});

describe('device tokens', () => {
  const claims = { userId: 1, deviceId: 2, issuedAt: 1_700_000_000 };

  it('signs hmac-sha256 tokens as <userId>:<deviceId>:<timestamp>.<hex HMAC>', () => {
    expect(signDeviceToken(claims, 'secret', 'hmac-sha256')).toBe(
      '1:2:1700000000.1e694d3c634367f2c188eee0b2a7a10022381b3bf85fd5a4d83c7a2b3707bfe7',
    );
    expect(signDeviceToken(claims, 'secret', 'djb2')).toBe('1:2:1700000000.440b6b9d');
  });

  it('verifies a token only with its own secret and scheme', () => {
    const hmac = signDeviceToken(claims, 'secret', 'hmac-sha256');
    const weak = signDeviceToken(claims, 'secret', 'djb2');
    expect(verifyDeviceToken(hmac, 'secret', 'hmac-sha256')).toEqual(claims);
    expect(verifyDeviceToken(weak, 'secret', 'djb2')).toEqual(claims);
    expect(verifyDeviceToken(hmac, 'other', 'hmac-sha256')).toBeUndefined();
    expect(verifyDeviceToken(weak, 'secret', 'hmac-sha256')).toBeUndefined();
    expect(verifyDeviceToken(hmac, 'secret', 'djb2')).toBeUndefined();
  });

  it('refuses tokens whose payload or hash was changed', () => {
    const token = signDeviceToken(claims, 'secret', 'hmac-sha256');
    const [payload, hash] = token.split('.') as [string, string];
    expect(verifyDeviceToken(`9:2:1700000000.${hash}`, 'secret', 'hmac-sha256')).toBeUndefined();
    expect(verifyDeviceToken(`1:3:1700000000.${hash}`, 'secret', 'hmac-sha256')).toBeUndefined();
    expect(
      verifyDeviceToken(`${payload}.${hash.toUpperCase()}`, 'secret', 'hmac-sha256'),
    ).toBeUndefined();
    expect(
      verifyDeviceToken(`${payload}.${'0'.repeat(64)}`, 'secret', 'hmac-sha256'),
    ).toBeUndefined();
  });

  it.each([
    undefined,
    null,
    42,
    {},
    '',
    '1:2:3',
    '1:2.abc',
    '0:2:3.440b6b9d',
    '01:2:3.440b6b9d',
    '1:2:3.440b6b9',
    `1:2:3.${'a'.repeat(300)}`,
    '1:2:3.440b6b9d\n',
  ])('parses %j as malformed', (token) => {
    expect(parseDeviceToken(token)).toBeUndefined();
    expect(verifyDeviceToken(token, 'secret', 'hmac-sha256')).toBeUndefined();
  });
});

describe('room ids', () => {
  it('issues <userId>.<32 hex>.<32 hex sig> ids that verify to their user with the same secret only', () => {
    const room = createRoomId(5, 'secret');
    expect(room).toMatch(/^5\.[0-9a-f]{32}\.[0-9a-f]{32}$/);
    expect(verifyRoomId(room, 'secret')).toBe(5);
    expect(verifyRoomId(room, 'other')).toBeUndefined();
    expect(verifyRoomId(room.replace(/^5\./, '6.'), 'secret')).toBeUndefined();
    expect(createRoomId(5, 'secret')).not.toBe(room);
  });

  it('matches the published signature vector', () => {
    expect(
      verifyRoomId('5.00112233445566778899aabbccddeeff.bb938e2cb97608c532f3db8c57df1b66', 'secret'),
    ).toBe(5);
  });
});
