import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TokenSignature } from '../../server/config/common.ts';
import type { RelayConfig } from '../../server/config/relay-config.ts';
import type { ConnectionBudget } from '../../server/connection-budget.ts';
import { createLogger } from '../../server/log.ts';
import type { Broker } from '../../server/relay/broker.ts';
import {
  createRelay,
  type Relay,
  type RelayTuning,
  type Repeat,
} from '../../server/relay/relay.ts';
import type { DocumentStore } from '../../server/store/document-store.ts';
import type { TlsContextSource } from '../../server/tls/secure-port.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { testRelayConfig, testSecret } from './configs.ts';
import { RelayClient } from './relay-client.ts';

/** A clock the test moves by hand (for the buffer window). */
export interface TestClock {
  now(): number;
  advance(ms: number): void;
}

export function createTestClock(start = Date.now()): TestClock {
  let at = start;
  return {
    now: () => at,
    advance(ms) {
      at += ms;
    },
  };
}

export interface RelayHarnessOptions {
  secret?: string;
  config?: Partial<RelayConfig>;
  tuning?: Partial<RelayTuning>;
  /** Reuse a folder (and its relay.db) from an earlier harness: a restart. */
  dir?: string;
  clock?: TestClock;
  /** Drives the heartbeat and the sweep instead of real intervals. */
  repeat?: Repeat;
  /** Serves WSS with this certificate (`wsUrl` is then `wss://`). */
  tls?: TlsContextSource;
  /** A document store instead of store.db (the cluster's PostgreSQL one; null: none); closed with the relay. */
  store?: DocumentStore | null;
  /** A broker instead of the in-process one (a cluster broker on a nats-server of the test's). */
  broker?: Broker;
  /** The budget of untrusted connections (default the relay's own). */
  connectionBudget?: ConnectionBudget;
}

export interface RelayHarness {
  relay: Relay;
  secret: string;
  signature: TokenSignature;
  dir: string;
  clock: TestClock;
  wsUrl: string;
  statusUrl: string;
  /** A device token signed with the relay's secret (or `secret`). */
  token(userId: number, deviceId: number, secret?: string): string;
  /** A room id of a user signed with the relay's secret (or `secret`). */
  room(userId: number, secret?: string): string;
  /** A new client connected to the relay. */
  client(): Promise<RelayClient>;
  /** A new client joined to `room` as `deviceId` of `userId`; resolves with it and its `joined` frame. */
  joined(
    room: string,
    userId: number,
    deviceId: number,
  ): Promise<{ client: RelayClient; joined: Record<string, unknown> }>;
  /** Closes the relay (clients get 1001), then cuts the clients; the folder stays when `keepDir`. */
  close(options?: { keepDir?: boolean }): Promise<void>;
}

/** Starts an in-process relay on 127.0.0.1 with ephemeral ports and a temp SQLite file. */
export async function startRelayHarness(options: RelayHarnessOptions = {}): Promise<RelayHarness> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'relay-test-'));
  const secret = options.secret ?? testSecret;
  const config = testRelayConfig(dir, { secret, ...options.config });
  const clock = options.clock ?? createTestClock();
  const relay = createRelay({
    config,
    secret,
    logger: createLogger(process.env.RELAY_TEST_LOG === '1' ? 'debug' : 'silent'),
    now: clock.now,
    tuning: options.tuning,
    repeat: options.repeat,
    tls: options.tls,
    store: options.store,
    broker: options.broker,
    connectionBudget: options.connectionBudget,
  });
  const ports = await relay.listen();
  const wsUrl = `${options.tls ? 'wss' : 'ws'}://127.0.0.1:${ports.wsPort}/`;
  const clients: RelayClient[] = [];
  const signature = config.tokenSignature;
  const harness: RelayHarness = {
    relay,
    secret,
    signature,
    dir,
    clock,
    wsUrl,
    statusUrl: `http://127.0.0.1:${ports.statusPort}`,
    token: (userId, deviceId, withSecret = secret) =>
      signDeviceToken(
        { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) },
        withSecret,
        signature,
      ),
    room: (userId, withSecret = secret) => createRoomId(userId, withSecret),
    async client() {
      const client = new RelayClient(wsUrl);
      clients.push(client);
      await client.opened;
      return client;
    },
    async joined(room, userId, deviceId) {
      const client = await harness.client();
      const joined = await client.join(room, deviceId, harness.token(userId, deviceId));
      if (joined.type !== 'joined') throw new Error(`join failed: ${JSON.stringify(joined)}`);
      return { client, joined };
    },
    async close(closeOptions = {}) {
      await relay.close();
      for (const client of clients) client.terminate();
      if (!closeOptions.keepDir && options.dir === undefined)
        rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}
