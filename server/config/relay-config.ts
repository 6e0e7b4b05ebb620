import { resolve } from 'node:path';
import { z } from 'zod';
import {
  bindSchema,
  type LogLevel,
  logLevelSchema,
  portSchema,
  positiveInt,
  type TokenSignature,
  tokenSignatureSchema,
} from './common.ts';
import type { ConfEntry } from './conf-file.ts';
import { applyEnv, collectKeys, upperKey, validateKeys } from './keys.ts';

const dottedKeys = [
  'auth.secret',
  'sqlite.path',
  'ws.port',
  'status.port',
  'bind',
  'auth.tokenSignature',
  'rate.perSecond',
  'rate.burst',
  'room.maxDevices',
  'message.maxBytes',
  'buffer.seconds',
  'buffer.maxMessages',
  'buffer.maxBytes',
  'log.level',
] as const;

/** relay.conf keys: each dotted key, also accepted in upper case (`rate.perSecond` = `RATE_PER_SECOND`). */
export const relayKeyNames: Record<string, readonly string[]> = Object.fromEntries(
  dottedKeys.map((key) => [key, [key, upperKey(key)]]),
);

const relaySchema = z.object({
  /** Shared secret; empty disables token validation (development only). */
  'auth.secret': z.string().optional(),
  /** SQLite file of the durable buffer. Default ./data/relay.db. */
  'sqlite.path': z.string().trim().min(1).optional(),
  /** WebSocket port. Default 8443. */
  'ws.port': portSchema.default(8443),
  /** HTTP status port (/health, /metrics). Default 8444. */
  'status.port': portSchema.default(8444),
  bind: bindSchema.default('0.0.0.0'),
  'auth.tokenSignature': tokenSignatureSchema.default('hmac-sha256'),
  /** Token-bucket refill rate per connection, messages per second. Default 200. */
  'rate.perSecond': positiveInt('messages per second').default(200),
  /** Token-bucket size per connection. Default 400. */
  'rate.burst': positiveInt('a message count').default(400),
  /** Devices per room. Default 64. */
  'room.maxDevices': positiveInt('a device count').default(64),
  /** Largest accepted frame in bytes; larger closes with 1009. Default 1 MiB. */
  'message.maxBytes': positiveInt('a size in bytes').default(1_048_576),
  /** How long messages for an absent device are kept, in seconds. Default 60. */
  'buffer.seconds': positiveInt('a number of seconds').default(60),
  /** Per-device cap on buffered messages; the oldest are dropped beyond it. Default 10,000. */
  'buffer.maxMessages': positiveInt('a message count').default(10_000),
  /** Per-device cap on buffered bytes; the oldest are dropped beyond it. Default 16 MiB. */
  'buffer.maxBytes': positiveInt('a size in bytes').default(16 * 1024 * 1024),
  'log.level': logLevelSchema.default('info'),
});

/** The validated relay.conf. */
export interface RelayConfig {
  /** undefined: not configured (co-hosted takes the auth secret); '': validation disabled. */
  secret: string | undefined;
  sqlitePath: string;
  wsPort: number;
  statusPort: number;
  bind: string;
  tokenSignature: TokenSignature;
  ratePerSecond: number;
  rateBurst: number;
  roomMaxDevices: number;
  messageMaxBytes: number;
  bufferSeconds: number;
  bufferMaxMessages: number;
  bufferMaxBytes: number;
  logLevel: LogLevel;
  unknownKeys: string[];
  /** Which keys were set explicitly (so co-hosting knows what to inherit). */
  explicit: Set<string>;
}

/** Builds the relay configuration from relay.conf entries, environment overrides and defaults. */
export function buildRelayConfig(
  entries: readonly ConfEntry[],
  file: string,
  baseDir: string,
  dataDir: string,
  env: NodeJS.ProcessEnv = {},
): RelayConfig {
  const collected = collectKeys(entries, relayKeyNames, file);
  applyEnv(collected, { 'log.level': 'LOG_LEVEL' }, env);
  const c = validateKeys(relaySchema, collected, file, relayKeyNames);
  return {
    secret: c['auth.secret'],
    sqlitePath: c['sqlite.path']
      ? resolve(baseDir, c['sqlite.path'])
      : resolve(dataDir, 'relay.db'),
    wsPort: c['ws.port'],
    statusPort: c['status.port'],
    bind: c.bind,
    tokenSignature: c['auth.tokenSignature'],
    ratePerSecond: c['rate.perSecond'],
    rateBurst: c['rate.burst'],
    roomMaxDevices: c['room.maxDevices'],
    messageMaxBytes: c['message.maxBytes'],
    bufferSeconds: c['buffer.seconds'],
    bufferMaxMessages: c['buffer.maxMessages'],
    bufferMaxBytes: c['buffer.maxBytes'],
    logLevel: c['log.level'],
    unknownKeys: collected.unknown.map((u) => `${u.file}:${u.line}: ${u.key}`),
    explicit: new Set(Object.keys(collected.values)),
  };
}
