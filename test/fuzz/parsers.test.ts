import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDeviceToken } from '../../protocol/device-token.ts';
import { buildAuthConfig } from '../../server/config/auth-config.ts';
import { ConfigError, parseConf } from '../../server/config/conf-file.ts';
import { ConfigProblems } from '../../server/config/keys.ts';
import { buildRelayConfig } from '../../server/config/relay-config.ts';
import { parseFrame } from '../../server/relay/messages.ts';
import {
  createRoomId,
  signDeviceToken,
  verifyDeviceToken,
  verifyRoomId,
} from '../../server/tokens.ts';

const runs = { numRuns: 400 };

/** Any text, biased towards the characters the conf syntax gives meaning to. */
const confChar = fc.constantFrom('=', '#', '"', "'", ' ', '\t', '\r', '\n', '.', '_', '\uFEFF');
const confText = fc
  .array(fc.oneof(confChar, fc.string({ maxLength: 6, unit: 'grapheme' })), { maxLength: 40 })
  .map((parts) => parts.join(''));

const authKeys = [
  'PORT',
  'DB_HOST',
  'DB_PORT',
  'DB_DRIVER',
  'DB_USER',
  'DB_PASS',
  'DB_NAME',
  'AUTH_SECRET',
  'AUTH_BASE_URL',
  'SMTP_HOST',
  'SMTP_PORT',
  'DEFAULT_TIER',
  'TOKEN_SIGNATURE',
  'MDNS',
  'SIGNUP',
  'ALLOWED_EMAILS',
  'BIND',
  'db.path',
  'relay.url',
];
const relayKeys = [
  'auth.secret',
  'ws.port',
  'status.port',
  'rate.perSecond',
  'rate.burst',
  'room.maxDevices',
  'message.maxBytes',
  'buffer.seconds',
  'buffer.maxMessages',
  'buffer.maxBytes',
  'buffer.userMaxBytes',
  'buffer.deviceMaxBytes',
  'auth.tokenSignature',
  'bind',
];
const confValue = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.integer().map(String),
  fc.double().map(String),
  fc.constantFrom('', '0', '-1', '65536', '1e3', 'NaN', 'on', 'off', 'djb2', 'pro', '::1', ' 7 '),
);
const entries = (keys: string[]) =>
  fc.array(
    fc.record({
      key: fc.oneof(fc.constantFrom(...keys), fc.string({ maxLength: 12 })),
      value: confValue,
    }),
    { maxLength: 12 },
  );

/** The config layer's contract: a result or a typed user error, never anything else. */
function typedOrValid(fn: () => unknown): void {
  try {
    fn();
  } catch (err: unknown) {
    if (err instanceof ConfigError || err instanceof ConfigProblems) {
      expect(err.message).not.toMatch(/\n\s+at /);
      return;
    }
    throw err;
  }
}

describe('fuzzing the configuration parser', () => {
  it('parses any text into entries or a ConfigError naming the file and line', () => {
    fc.assert(
      fc.property(confText, (text) => {
        try {
          const parsed = parseConf(text, 'auth.conf');
          for (const entry of parsed) {
            expect(entry.key).toMatch(/^[A-Za-z][A-Za-z0-9_.-]*$/);
            expect(entry.line).toBeGreaterThan(0);
          }
        } catch (err: unknown) {
          if (!(err instanceof ConfigError)) throw err;
          expect(err.file).toBe('auth.conf');
          expect(err.line).toBeGreaterThan(0);
        }
      }),
      runs,
    );
  });

  it('builds an auth config or reports typed problems for any entries and environment', () => {
    fc.assert(
      fc.property(
        entries(authKeys),
        fc.dictionary(fc.constantFrom(...authKeys.filter((k) => !k.includes('.'))), confValue),
        (list, env) => {
          typedOrValid(() =>
            buildAuthConfig(
              list.map((e, i) => ({ ...e, line: i + 1 })),
              'auth.conf',
              '/tmp',
              env,
            ),
          );
        },
      ),
      runs,
    );
  });

  it('builds a relay config or reports typed problems for any entries', () => {
    fc.assert(
      fc.property(entries(relayKeys), (list) => {
        typedOrValid(() =>
          buildRelayConfig(
            list.map((e, i) => ({ ...e, line: i + 1 })),
            'relay.conf',
            '/tmp',
            '/tmp/data',
          ),
        );
      }),
      runs,
    );
  });
});

describe('fuzzing the token parsers', () => {
  const secret = 'fuzz-secret';
  const tokenLike = fc.oneof(
    fc.anything(),
    fc.string({ maxLength: 300 }),
    fc
      .tuple(
        fc.oneof(fc.nat().map(String), fc.string({ maxLength: 20 })),
        fc.oneof(fc.nat().map(String), fc.string({ maxLength: 20 })),
        fc.oneof(fc.nat().map(String), fc.string({ maxLength: 12 })),
        fc.oneof(fc.stringMatching(/^[0-9a-f]{8,64}$/), fc.string({ maxLength: 70 })),
      )
      .map(([u, d, t, h]) => `${u}:${d}:${t}.${h}`),
  );

  it('parses or refuses any value without throwing, and never verifies a forged token', () => {
    fc.assert(
      fc.property(tokenLike, (token) => {
        const parsed = parseDeviceToken(token);
        if (parsed !== undefined) {
          expect(Number.isSafeInteger(parsed.userId)).toBe(true);
          expect(Number.isSafeInteger(parsed.deviceId)).toBe(true);
        }
        expect(verifyDeviceToken(token, secret, 'hmac-sha256')).toBeUndefined();
        expect(verifyDeviceToken(token, secret, 'djb2')).toBeUndefined();
        expect(verifyRoomId(token, secret)).toBeUndefined();
      }),
      runs,
    );
  });

  it('verifies a signed token and refuses every single-character change of it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 40 }),
        fc.integer({ min: 1, max: 2 ** 40 }),
        fc.constantFrom('hmac-sha256' as const, 'djb2' as const),
        fc.nat(),
        fc.string({ minLength: 1, maxLength: 1 }),
        (userId, deviceId, signature, at, replacement) => {
          const token = signDeviceToken(
            { userId, deviceId, issuedAt: 1_700_000_000 },
            secret,
            signature,
          );
          expect(verifyDeviceToken(token, secret, signature)).toMatchObject({ userId, deviceId });
          const i = at % token.length;
          if (token[i] === replacement) return;
          const forged = token.slice(0, i) + replacement + token.slice(i + 1);
          expect(verifyDeviceToken(forged, secret, signature)).toBeUndefined();
          const room = createRoomId(userId, secret);
          expect(verifyRoomId(room, secret)).toBe(userId);
          const j = at % room.length;
          if (room[j] !== replacement)
            expect(
              verifyRoomId(room.slice(0, j) + replacement + room.slice(j + 1), secret),
            ).toBeUndefined();
        },
      ),
      runs,
    );
  });
});

describe('fuzzing the relay frame parser', () => {
  const frameLike = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.json(),
    fc.anything().map((v) => {
      try {
        return JSON.stringify(v) ?? 'undefined';
      } catch {
        return 'x';
      }
    }),
    fc
      .record(
        {
          type: fc.oneof(
            fc.constantFrom('join', 'leave', 'ping', 'route', '__proto__'),
            fc.anything(),
          ),
          room: fc.anything(),
          device: fc.oneof(fc.integer(), fc.double(), fc.string({ maxLength: 300 }), fc.anything()),
          token: fc.anything(),
          to: fc.oneof(fc.constantFrom('host', 'broadcast'), fc.anything()),
          payload: fc.anything(),
        },
        { requiredKeys: [] },
      )
      .map((v) => JSON.stringify(v)),
  );

  it('turns any text into a typed frame or a typed error, never an exception', () => {
    const kinds = new Set(['join', 'leave', 'ping', 'route', 'invalid_json', 'invalid_message']);
    fc.assert(
      fc.property(frameLike, (text) => {
        const frame = parseFrame(text);
        expect(kinds.has(frame.type)).toBe(true);
        if (frame.type === 'route') {
          expect(typeof frame.payload).toBe('object');
          expect(Array.isArray(frame.payload)).toBe(false);
        }
      }),
      { numRuns: 1_000 },
    );
  });
});
