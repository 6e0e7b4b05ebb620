import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import type { LoginVariant } from '../../client/auth-client.ts';
import { createAuthClient } from '../../client/auth-client.ts';
import type { SignedIn } from '../../client/auth-types.ts';
import type { RelayConnection, WebSocketConstructor } from '../../client/relay-connection.ts';
import type { RoutedMessage } from '../../client/relay-frames.ts';
import { type HostProcess, startHostProcess, writeConf } from '../helpers/relay-process.ts';

/** Fixed ports for a host that must come back on the same addresses after a restart. */
export interface HostPorts {
  auth: number;
  ws: number;
  status: number;
}

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A config dir for a headless host on loopback, mDNS off, new users on `pro`. */
export function hostDir(ports?: HostPorts): string {
  const dir = mkdtempSync(join(tmpdir(), 'sync-client-'));
  writeConf(dir, 'auth.conf', {
    PORT: ports?.auth ?? 0,
    BIND: '127.0.0.1',
    MDNS: 'off',
    DEFAULT_TIER: 'pro',
  });
  writeConf(dir, 'relay.conf', { 'ws.port': ports?.ws ?? 0, 'status.port': ports?.status ?? 0 });
  return dir;
}

export interface RunningHost {
  process: HostProcess;
  authUrl: string;
  relayUrl: string;
  /** Waits for the next dev-mode magic-link token printed for `email`. */
  magicToken(email: string): Promise<string>;
}

export async function startHost(dir: string): Promise<RunningHost> {
  const process = await startHostProcess(['--headless'], dir);
  const authUrl = await process.url('auth');
  const relayUrl = await process.url('relay');
  const seen = new Map<string, number>();
  return {
    process,
    authUrl,
    relayUrl,
    async magicToken(email) {
      const prefix = `[dev] Magic link token for ${email}: `;
      const index = seen.get(email) ?? 0;
      await waitFor(
        () => process.stdout.filter((line) => line.startsWith(prefix)).length > index,
        10_000,
        `magic link for ${email}`,
      );
      seen.set(email, index + 1);
      const line = process.stdout.filter((l) => l.startsWith(prefix))[index]!;
      return line.slice(prefix.length).trim();
    },
  };
}

/** Signs in through the library: requests a link, reads the token the host printed, verifies. */
export async function signIn(
  host: RunningHost,
  email: string,
  deviceName: string,
  variant: LoginVariant = 'device',
): Promise<SignedIn> {
  const auth = createAuthClient({ authUrl: host.authUrl });
  await auth.requestLogin(email, variant);
  const token = await host.magicToken(email);
  return auth.signIn(token, { deviceName, platform: 'test' }, variant);
}

/** Polls until `check` holds, with a deadline (never a fixed sleep). */
export async function waitFor(
  check: () => boolean,
  deadlineMs = 10_000,
  what = 'condition',
): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`${what} not reached within ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** `ws`'s WebSocket, remembering every socket it opened so a test can cut one. */
export function trackedWebSocket(): { WebSocket: WebSocketConstructor; sockets: WebSocket[] } {
  const sockets: WebSocket[] = [];
  class TrackedWebSocket extends WebSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  return { WebSocket: TrackedWebSocket, sockets };
}

/** Every routed message a connection receives, in order. */
export function inbox(connection: RelayConnection): RoutedMessage[] {
  const messages: RoutedMessage[] = [];
  connection.on('message', (message) => messages.push(message));
  return messages;
}
