import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestHost, type TestHost } from '../helpers/host.ts';

/** The statuses of the contract's error table, plus the success statuses of the endpoints. */
const allowed = new Set([200, 201, 202, 204, 400, 401, 403, 404, 413, 415, 429, 503]);
const errorCodes = new Set([
  'invalid_request',
  'unauthorized',
  'invalid_token',
  'token_expired',
  'token_used',
  'project_limit',
  'pair_denied',
  'not_found',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'unavailable',
]);

const paths = [
  '/health',
  '/.well-known/sync-host',
  '/auth/login',
  '/auth/magic-link',
  '/auth/verify',
  '/auth/devices',
  '/auth/device',
  '/auth/device/:id',
  '/auth/project',
  '/auth/projects',
  '/auth/project/:id',
  '/auth/subscription',
  '/auth/pair',
  '/auth/pair/:id',
  '/auth/pair/approve',
  '/auth/pair/deny',
  '/admin/api/pairings',
  '/admin/api/pairings/approve',
  '/admin/api/pairings/deny',
  '/admin/api/overview',
  '/admin/api/users',
  '/admin/api/users/:id',
  '/admin/api/users/:id/subscription',
  '/admin/api/devices',
  '/admin/api/devices/:id',
  '/admin/api/projects',
  '/admin/api/projects/:id',
  '/admin/api/pending-links',
  '/admin/api/relay',
  '/admin/api/storage',
  '/admin/api/storage/names',
  '/admin/api/connection',
];

/** Hostile strings: huge, unicode, control characters, JSON and path tricks. */
const hostile = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ maxLength: 40, unit: 'grapheme' }),
  fc.string({ maxLength: 40, unit: 'binary' }),
  fc.constantFrom(
    '',
    '0',
    '-1',
    '1e309',
    '9007199254740993',
    '1.5',
    'null',
    '%00',
    '%ff',
    '..%2f..%2fetc%2fpasswd',
    '\u202e',
    '𝕏'.repeat(300),
    'a'.repeat(5_000),
    '__proto__',
    'constructor',
  ),
);
const jsonValue = fc.oneof(
  hostile,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(hostile, { maxLength: 3 }),
  fc.jsonValue({ maxDepth: 3 }),
);
const body = fc.oneof(
  fc.constant(undefined),
  fc
    .record(
      {
        email: jsonValue,
        deviceName: jsonValue,
        platform: jsonValue,
        projectKey: jsonValue,
        name: jsonValue,
        jwt: jsonValue,
        tier: fc.oneof(fc.constantFrom('free', 'personal', 'pro', 'team'), jsonValue),
        expiresAt: fc.oneof(fc.constant('2030-01-01T00:00:00Z'), jsonValue),
        __proto__: jsonValue,
      },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v)),
  jsonValue.map((v) => JSON.stringify(v)),
  hostile,
  fc.constant('{"email":'),
  fc.constant(`{"name":"${'x'.repeat(20_000)}"}`),
);

interface Answer {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/** A raw request (node:http), so duplicate headers and odd methods reach the server as written. */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string | string[]>,
  payload: string | undefined,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          text: Buffer.concat(chunks).toString('utf8'),
          headers: res.headers,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

describe('HTTP fuzz of every auth and admin endpoint', () => {
  let t: TestHost;
  let deviceToken = '';
  const logs: string[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    t = await startTestHost({
      ui: false,
      logs,
      auth: ['DEFAULT_TIER=personal'],
      failureLimit: { points: 100_000, seconds: 60 },
    });
    deviceToken = (await t.signIn('fuzz@example.com')).deviceToken;
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await t?.close();
  });

  it('answers only statuses of the contract error table, as JSON errors without stacks', async () => {
    const method = fc.constantFrom(
      'GET',
      'POST',
      'PUT',
      'PATCH',
      'DELETE',
      'OPTIONS',
      'HEAD',
      'TRACE',
    );
    const id = fc.oneof(fc.nat().map(String), hostile.map(encodeURIComponent));
    const query = fc.option(
      fc
        .array(
          fc.tuple(
            fc.constantFrom('email', 'token', 'deviceName', 'platform', 'x', 'token[]'),
            hostile,
          ),
          { maxLength: 4 },
        )
        .map((pairs) =>
          pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'),
        ),
      { nil: undefined },
    );
    const auth = fc.oneof(
      fc.constant<'none' | 'device' | 'admin' | 'duplicate' | 'junk'>('none'),
      fc.constant<'none' | 'device' | 'admin' | 'duplicate' | 'junk'>('device'),
      fc.constant<'none' | 'device' | 'admin' | 'duplicate' | 'junk'>('admin'),
      fc.constant<'none' | 'device' | 'admin' | 'duplicate' | 'junk'>('duplicate'),
      fc.constant<'none' | 'device' | 'admin' | 'duplicate' | 'junk'>('junk'),
    );
    const contentType = fc.constantFrom(
      undefined,
      'application/json',
      'text/plain',
      'application/json; charset=utf-16',
      'multipart/form-data; boundary=x',
    );

    await fc.assert(
      fc.asyncProperty(
        method,
        fc.constantFrom(...paths),
        id,
        query,
        auth,
        contentType,
        body,
        hostile,
        async (m, pathTemplate, idValue, q, who, type, payload, junk) => {
          const path = pathTemplate.replace(':id', idValue) + (q === undefined ? '' : `?${q}`);
          const headers: Record<string, string | string[]> = {};
          const asciiJunk = junk.replace(/[^\x21-\x7e]/g, '').slice(0, 200);
          if (who === 'device') headers.authorization = `Bearer ${deviceToken}`;
          if (who === 'admin') headers.authorization = `Bearer ${t.host.adminToken}`;
          if (who === 'duplicate')
            headers.authorization = [`Bearer ${deviceToken}`, `Bearer ${t.host.adminToken}`];
          if (who === 'junk') headers.authorization = `Bearer ${asciiJunk}`;
          if (type !== undefined) headers['content-type'] = type;
          const sentBody = m === 'GET' || m === 'HEAD' ? undefined : payload;
          const res = await send(t.base, m, path, headers, sentBody);
          const where = `${m} ${path.slice(0, 120)} (${who}) → ${res.status} ${res.text.slice(0, 200)}`;
          expect(allowed.has(res.status), where).toBe(true);
          expect(res.text, where).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/);
          if (res.status >= 400 && m !== 'HEAD' && !path.startsWith('/health')) {
            let parsed: { error?: { code?: string; message?: string } } = {};
            try {
              parsed = JSON.parse(res.text) as typeof parsed;
            } catch {
              expect.fail(`not JSON: ${where}`);
            }
            expect(errorCodes.has(parsed.error?.code ?? ''), where).toBe(true);
            expect(typeof parsed.error?.message, where).toBe('string');
          }
          if (res.status === 429) expect(res.headers['retry-after'], where).toBeDefined();
        },
      ),
      { numRuns: 600 },
    );
    expect(unhandled).toEqual([]);
    expect(logs.filter((l) => l.includes('unhandled error'))).toEqual([]);
  }, 120_000);
});
