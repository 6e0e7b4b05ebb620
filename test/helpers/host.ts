import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { pinnedFetch } from '../../client/pinning.ts';
import { createAdminMount } from '../../server/admin/index.ts';
import { loadConfig } from '../../server/config/load.ts';
import { type Host, startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';

export interface TestHost {
  host: Host;
  dir: string;
  /** http://127.0.0.1:<auth port> */
  base: string;
  relayUrl: string;
  /** Lines the host printed (URLs, dev-mode magic links). */
  printed: string[];
  /** A call to the admin API with the admin token (or `token` when given). */
  admin(
    method: string,
    path: string,
    body?: unknown,
    token?: string,
  ): Promise<{ status: number; body: unknown; headers: Headers }>;
  /** A user signed in through a pending dev-mode link, with one device. */
  signIn(
    email: string,
    deviceName?: string,
  ): Promise<{ userId: number; deviceId: number; deviceToken: string }>;
  close(): Promise<void>;
}

/**
 * The in-process host factory: the real host (auth + relay + admin, `startHost` of
 * server/host.ts with the config the real loader reads) on 127.0.0.1 with ephemeral ports, a
 * temp data folder, mDNS off, TLS off (`auth: ['TLS=self-signed']` turns it on) and silent logs. The spawned factory is `startHostProcess` in
 * ./host-process.ts.
 */
export async function startTestHost(
  options: {
    auth?: string[];
    /** relay.conf lines besides the ports (`buffer.seconds=5`). */
    relay?: string[];
    failureLimit?: { points: number; seconds: number };
    ui?: false;
    /** Collects the host's JSON log lines (else logs are silent). */
    logs?: string[];
    /** The host's clock (default Date.now). */
    now?: () => number;
  } = {},
): Promise<TestHost> {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-admin-'));
  writeFileSync(
    join(dir, 'auth.conf'),
    // TLS off unless a test's own lines turn it on (a later line wins).
    ['PORT=0', 'BIND=127.0.0.1', 'MDNS=off', 'TLS=off', ...(options.auth ?? [])].join('\n'),
  );
  writeFileSync(
    join(dir, 'relay.conf'),
    ['ws.port=0', 'status.port=0', ...(options.relay ?? [])].join('\n'),
  );
  const config = loadConfig(dir, {});
  const logs = options.logs;
  const logger = logs
    ? createLogger('debug', { write: (line: string) => logs.push(line) })
    : createLogger('silent');
  const printed: string[] = [];
  const host = await startHost({
    mode: 'headless',
    config,
    logger,
    print: (line) => printed.push(line),
    now: options.now,
    limits: {
      linksPerEmail: { points: 1000, seconds: 60 },
      linksPerClient: { points: 1000, seconds: 60 },
    },
    mount: createAdminMount({
      logger,
      defaultTier: config.auth.defaultTier,
      failureLimit: options.failureLimit,
      ui: options.ui,
    }),
  });
  const base = host.urls.auth ?? '';
  const relayUrl = host.urls.relay ?? '';
  // With TLS on, the helpers reach the host pinned to its certificate, as a paired device does.
  const fetch = host.fingerprint === undefined ? globalThis.fetch : pinnedFetch(host.fingerprint);

  const admin: TestHost['admin'] = async (method, path, body, token = host.adminToken) => {
    const res = await fetch(`${base}/admin/api${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text === '' ? undefined : (JSON.parse(text) as unknown),
      headers: res.headers,
    };
  };

  const signIn: TestHost['signIn'] = async (email, deviceName = 'laptop') => {
    await fetch(`${base}/auth/magic-link`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email }),
    });
    const pending = (await admin('GET', '/pending-links')).body as {
      links: Array<{ email: string; link: string }>;
    };
    const link = pending.links.find((l) => l.email === email);
    if (!link) throw new Error(`no pending link for ${email}`);
    const res = await fetch(
      `${link.link}&deviceName=${encodeURIComponent(deviceName)}&platform=linux`,
    );
    const body = (await res.json()) as {
      deviceToken: string;
      device: { id: number };
      user: { id: number };
    };
    return { userId: body.user.id, deviceId: body.device.id, deviceToken: body.deviceToken };
  };

  return {
    host,
    dir,
    base,
    relayUrl,
    printed,
    admin,
    signIn,
    async close() {
      await host.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Registers a project for a device (the user's tier must allow it). */
export async function registerProject(
  base: string,
  deviceToken: string,
  projectKey: string,
): Promise<{ id: number; roomId: string }> {
  const res = await fetch(`${base}/auth/project`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${deviceToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ projectKey, name: `Project ${projectKey}` }),
  });
  if (res.status !== 201 && res.status !== 200)
    throw new Error(`project registration answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { project: { id: number; roomId: string } }).project;
}

/** A relay socket joined to a room; `closed` resolves with the close code. */
export async function joinRelay(
  relayUrl: string,
  room: string,
  device: number,
  token: string,
): Promise<{ socket: WebSocket; closed: Promise<number> }> {
  const socket = new WebSocket(relayUrl);
  const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const joined = new Promise<void>((resolve, reject) => {
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type?: string };
      if (frame.type === 'joined') resolve();
      else if (frame.type === 'error') reject(new Error(String(data)));
    });
  });
  socket.send(JSON.stringify({ type: 'join', room, device: String(device), token }));
  await joined;
  return { socket, closed };
}
