import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAdminMount } from '../../server/admin/index.ts';
import { type AuthServer, createAuthServer } from '../../server/auth/index.ts';
import type { AuthLimits } from '../../server/auth/rate-limits.ts';
import type { AuthConfig, DbConfig } from '../../server/config/auth-config.ts';
import type { Host } from '../../server/host.ts';
import { captureLogger } from './capture.ts';
import { testAuthConfig } from './configs.ts';
import type { DbTarget } from './databases.ts';
import { eventually } from './wait.ts';

export interface AuthHarness {
  url: string;
  server: AuthServer;
  config: AuthConfig;
  secret: string;
  /** Lines printed on stdout (dev-mode magic links). */
  printed: string[];
  /** Log lines (JSON). */
  logs: string[];
  clock: { now: number; advance(ms: number): void };
  request(
    method: string,
    path: string,
    init?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Response>;
  /** The token of the latest dev-mode link printed for `email`. */
  linkToken(email: string): Promise<string>;
  /** Requests a link and verifies it with device data: a signed-in device. */
  signIn(email: string, deviceName?: string, platform?: string): Promise<SignedIn>;
  close(): Promise<void>;
}

export interface SignedIn {
  deviceToken: string;
  device: { id: number; userId: number; deviceName: string; platform: string };
  user: { id: number; email: string };
}

export interface HarnessOptions {
  conf?: Record<string, string>;
  limits?: Partial<AuthLimits>;
  secret?: string;
  /** Rewrites the database config (e.g. to go through a TCP proxy the test controls). */
  mapDb?: (config: DbConfig) => DbConfig;
  /** Mounts the admin API (as `sync-host auth` does: no relay); calls take `adminToken`. */
  admin?: boolean;
}

/** The admin token of harnesses started with `admin: true`. */
const roomy = { points: 10_000, seconds: 900 };
/** Rate limits no test of the pairing flow reaches (tests of one limit lower just that one). */
export const roomyLimits = {
  linksPerClient: roomy,
  linksPerEmail: roomy,
  verifiesPerClient: roomy,
  authFailuresPerClient: roomy,
  pairingsPerClient: roomy,
  pairPollFailuresPerClient: roomy,
  pairCodeFailuresPerApprover: roomy,
  pairCodeFailuresPerClient: roomy,
  pendingPairingsPerClient: 1000,
};

export const adminToken = 'test-admin-token-0123456789abcdef';

/** Starts the real auth service on 127.0.0.1, an ephemeral port and a fresh database of `target`. */
export async function startAuth(
  target: DbTarget,
  options: HarnessOptions = {},
): Promise<AuthHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-auth-'));
  const db = await target.create(dir);
  const config = {
    // Test users are not the owner (who would get tier pro) unless a test says otherwise.
    ...testAuthConfig(dir, { OWNER_EMAIL: 'owner@example.com', ...options.conf }),
    db: options.mapDb?.(db.config) ?? db.config,
  };
  const { logger, lines: logs } = captureLogger();
  const printed: string[] = [];
  const clock = {
    now: Date.now(),
    advance(ms: number) {
      clock.now += ms;
    },
  };
  const secret = options.secret ?? 'test-secret-0123456789abcdef-0123456789';
  const server = await createAuthServer({
    config,
    secret,
    logger,
    print: (line) => printed.push(line),
    now: () => clock.now,
    limits: options.limits,
    sqliteEngine: db.sqliteEngine,
    retryMs: 200,
    mount: options.admin
      ? (app, service, db) => {
          // The host of `sync-host auth`: no relay, the admin token of this harness.
          const host: Host = {
            urls: {},
            adminToken,
            adminTokenFile: { path: join(dir, 'admin-token'), created: false },
            relayPaused: false,
            mdns: false,
            pauseRelay: async () => {},
            resumeRelay: async () => {},
            close: async () => {},
          };
          createAdminMount({ logger, defaultTier: config.defaultTier, ui: false })(
            app,
            service,
            db,
            () => host,
          );
        }
      : undefined,
  });
  await server.ready;
  const port = await server.listen();
  const url = `http://127.0.0.1:${port}`;
  server.setUrls({ baseUrl: url, relayUrl: 'ws://127.0.0.1:1' });

  const request: AuthHarness['request'] = (method, path, init = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    return fetch(`${url}${path}`, { method, headers, body });
  };

  const linkToken = (email: string) =>
    eventually(() => {
      const prefix = `[dev] Magic link token for ${email}: `;
      const line = printed.findLast((l) => l.startsWith(prefix));
      return line?.slice(prefix.length);
    }, `a magic link for ${email}`);

  return {
    url,
    server,
    config,
    secret,
    printed,
    logs,
    clock,
    request,
    linkToken,
    async signIn(email, deviceName = 'laptop', platform = 'linux') {
      const sent = await request('GET', `/auth/login?email=${encodeURIComponent(email)}`);
      if (sent.status !== 200) throw new Error(`login answered ${sent.status}`);
      const token = await linkToken(email);
      const res = await request(
        'GET',
        `/auth/verify?token=${token}&deviceName=${encodeURIComponent(deviceName)}&platform=${encodeURIComponent(platform)}`,
      );
      if (res.status !== 200) throw new Error(`verify answered ${res.status}: ${await res.text()}`);
      return (await res.json()) as SignedIn;
    },
    async close() {
      await server.close();
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
