import { resolve } from 'node:path';
import { z } from 'zod';
import {
  bindSchema,
  httpUrl,
  logLevelSchema,
  natsUrlsSchema,
  portSchema,
  positiveInt,
  tokenSignatureSchema,
  trustProxySchema,
} from './common.ts';
import { type ConfEntry, ConfigError } from './conf-file.ts';
import {
  applyEnv,
  type Collected,
  ConfigProblems,
  collectKeys,
  configKey,
  keyNamesOf,
  unknownKeyLines,
  upperKey,
  validateKeys,
} from './keys.ts';
import { natsAccessKeys, refineNatsAccess } from './nats-access.ts';
import { sharedSecretSchema } from './secret-strength.ts';

/** A relay.conf key: its dotted spelling, also accepted in upper case (`RATE_PER_SECOND`). */
const relayKey = <S extends z.ZodType>(dotted: string, schema: S): S =>
  configKey(schema, dotted, upperKey(dotted));

/** Where relative paths in relay.conf are resolved. */
interface RelayPaths {
  /** The folder relay.conf was read from. */
  baseDir: string;
  /** The data folder (auth.conf's DATA_DIR): holds relay.db unless `sqlite.path` is set. */
  dataDir: string;
}

const mebibyte = 1024 * 1024;

/** A postgres:// or postgresql:// URL naming a host. */
function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return /^postgres(ql)?:$/.test(url.protocol) && url.hostname !== '';
  } catch {
    return false;
  }
}

/** The relay.conf schema: every key once, with its spelling, default and meaning. */
function relaySchema(paths: RelayPaths) {
  const keys = z.object({
    ...fileKeys(paths),
    ...portKeys(),
    ...connectionLimitKeys(),
    ...bufferKeys(),
    ...storeKeys(),
    ...memoryKeys(),
    ...clusterKeys(),
  });
  return keys.superRefine((c, ctx) => refineNatsAccess(relayKeyNames)(c, ctx));
}

/** relay.conf keys of the secret and the files: the buffer, the certificate and its key. */
function fileKeys(paths: RelayPaths) {
  return {
    /** Shared secret. undefined: not configured (co-hosted takes the auth secret); '': validation disabled (development only). */
    secret: relayKey('auth.secret', sharedSecretSchema),
    /** SQLite file of the durable buffer (absolute). Default <data dir>/relay.db. */
    sqlitePath: relayKey(
      'sqlite.path',
      z
        .string()
        .trim()
        .min(1)
        .optional()
        .transform((path) =>
          path ? resolve(paths.baseDir, path) : resolve(paths.dataDir, 'relay.db'),
        ),
    ),
    /** PEM certificate of the WebSocket port (wss://), with tls.key; unset: the host's, or plain ws://. */
    tlsCert: relayKey(
      'tls.cert',
      z
        .string()
        .trim()
        .min(1)
        .optional()
        .transform((path) => (path ? resolve(paths.baseDir, path) : undefined)),
    ),
    /** PEM private key of tls.cert. */
    tlsKey: relayKey(
      'tls.key',
      z
        .string()
        .trim()
        .min(1)
        .optional()
        .transform((path) => (path ? resolve(paths.baseDir, path) : undefined)),
    ),
  };
}

/** relay.conf keys of the ports, the auth service and the token signature. */
function portKeys() {
  return {
    /** WebSocket port. Default 8443. */
    wsPort: relayKey('ws.port', portSchema.default(8443)),
    /** HTTP status port (/health, /metrics). Default 8444. */
    statusPort: relayKey('status.port', portSchema.default(8444)),
    /** Listen address of both ports. Default 0.0.0.0. */
    bind: relayKey('bind', bindSchema.default('0.0.0.0')),
    /**
     * URL of the auth service (`http://host:8080`), for a relay running as its own process: it
     * checks joins against the auth service's devices and follows its feed of deleted devices.
     * undefined: no such check (co-hosted, the relay reads the auth database itself).
     */
    authUrl: relayKey('auth.url', httpUrl.optional()),
    /** Device-token signature: hmac-sha256 (default) or djb2. */
    tokenSignature: relayKey('auth.tokenSignature', tokenSignatureSchema.default('hmac-sha256')),
  };
}

/** relay.conf keys of one connection's limits: its rate, its room's devices, its frames' size. */
function connectionLimitKeys() {
  return {
    /** Token-bucket refill rate per connection, messages per second. Default 200. */
    ratePerSecond: relayKey('rate.perSecond', positiveInt('messages per second').default(200)),
    /** Token-bucket size per connection. Default 400. */
    rateBurst: relayKey('rate.burst', positiveInt('a message count').default(400)),
    /** Devices per room. Default 64. */
    roomMaxDevices: relayKey('room.maxDevices', positiveInt('a device count').default(64)),
    /** Largest accepted frame in bytes; larger closes with 1009. Default 1 MiB. */
    messageMaxBytes: relayKey(
      'message.maxBytes',
      positiveInt('a size in bytes').default(1_048_576),
    ),
  };
}

/** relay.conf keys of the buffer of messages for absent devices. */
function bufferKeys() {
  return {
    /** How long messages for an absent device are kept, in seconds. Default 60. */
    bufferSeconds: relayKey('buffer.seconds', positiveInt('a number of seconds').default(60)),
    /** Per-device cap on buffered messages; the oldest are dropped beyond it. Default 10,000. */
    bufferMaxMessages: relayKey(
      'buffer.maxMessages',
      positiveInt('a message count').default(10_000),
    ),
    /** Per-device cap on buffered bytes; the oldest are dropped beyond it. Default 16 MiB. */
    bufferDeviceMaxBytes: relayKey(
      'buffer.deviceMaxBytes',
      positiveInt('a size in bytes').default(16 * 1024 * 1024),
    ),
    /**
     * Bound of the buffered bytes of one user's rooms (each frame counted once, however many
     * devices it is kept for); the user's oldest are dropped beyond it. Default 64 MiB.
     */
    bufferUserMaxBytes: relayKey(
      'buffer.userMaxBytes',
      positiveInt('a size in bytes').default(64 * 1024 * 1024),
    ),
    /** Bound of the whole buffer in bytes; the oldest are dropped beyond it. Default 256 MiB. */
    bufferMaxBytes: relayKey(
      'buffer.maxBytes',
      positiveInt('a size in bytes').default(256 * 1024 * 1024),
    ),
  };
}

/** relay.conf keys of the document store: its bounds, its history, a cluster's database. */
function storeKeys() {
  return {
    /**
     * Bytes the document store (store.db, beside relay.db) keeps for one user's projects; past
     * it the user's appends are refused with `store_full`. Default 1 GiB.
     */
    storeUserMaxBytes: relayKey(
      'store.userMaxBytes',
      positiveInt('a size in bytes').default(1024 * mebibyte),
    ),
    /** Bytes the whole document store keeps; past it appends are refused. Default 16 GiB. */
    storeMaxBytes: relayKey(
      'store.maxBytes',
      positiveInt('a size in bytes').default(16 * 1024 * mebibyte),
    ),
    /** Days for which the store keeps every document's history (in steps). Default 30. */
    storeHistoryDays: relayKey('store.historyDays', positiveInt('a number of days').default(30)),
    /** The step of that history, in minutes: one state per step is kept. Default 10. */
    storeHistoryStepMinutes: relayKey(
      'store.historyStepMinutes',
      positiveInt('a number of minutes').default(10),
    ),
    /**
     * The cluster's document store: a postgres:// URL (its password never logged) of the
     * PostgreSQL database every relay node shares. Unset, a cluster node keeps no documents
     * (`store_unavailable`); a single relay keeps them in store.db and ignores it.
     */
    storeUrl: relayKey(
      'store.url',
      z
        .string()
        .trim()
        .refine(isPostgresUrl, {
          error: 'must be a postgres:// URL (postgres://user:password@host:5432/database)',
        })
        .optional(),
    ),
  };
}

/** relay.conf keys of the relay's memory: queued bytes, connections not joined, proxies trusted. */
function memoryKeys() {
  return {
    /**
     * Unsent bytes one receiver may have (queued by the relay and in its socket's write
     * buffer); past it the receiver is closed with 1013 and buffered for. Default 4 MiB.
     */
    maxQueuedBytes: relayKey(
      'relay.maxQueuedBytes',
      positiveInt('a size in bytes').default(4 * mebibyte),
    ),
    /**
     * Unsent bytes of every receiver together; past it the receivers with the most are closed
     * with 1013 (and buffered for) until the relay is below it again. Default 512 MiB.
     */
    maxMemoryBytes: relayKey(
      'relay.maxMemoryBytes',
      positiveInt('a size in bytes').default(512 * mebibyte),
    ),
    /**
     * Open connections from one client address that have not joined a room yet (the upgrade
     * request not finished, or upgraded and not joined); more are refused with 429. Default 32.
     */
    maxUnjoinedPerAddress: relayKey(
      'relay.maxUnjoinedPerAddress',
      positiveInt('a connection count').default(32),
    ),
    /**
     * Reverse proxies whose X-Forwarded-For gives a WebSocket client's address (for
     * `relay.maxUnjoinedPerAddress`). Default empty; co-hosted, auth.conf's TRUST_PROXY.
     */
    trustProxy: relayKey('trust.proxy', trustProxySchema),
  };
}

/** relay.conf keys of the log level and of a cluster: NATS, how to sign in to it, the node's name. */
function clusterKeys() {
  return {
    /** Log level of the relay alone (`sync-host relay`). Default info. */
    logLevel: relayKey('log.level', logLevelSchema.default('info')),
    /** NATS server URLs, comma-separated; set, the relay runs as one node of a cluster. */
    clusterNats: relayKey('cluster.nats', natsUrlsSchema.default([])),
    /** How this node signs in to NATS and checks its TLS certificate (nats-access.ts). */
    ...natsAccessKeys('dotted'),
    /** This node's name in the cluster. undefined: host name and ws port. */
    clusterNode: relayKey(
      'cluster.node',
      z
        .string()
        .trim()
        .regex(/^[A-Za-z0-9._:-]{1,100}$/, {
          error: 'must be a node name (letters, digits, . _ : -)',
        })
        .optional(),
    ),
  };
}

/** relay.conf keys: per field, its dotted spelling and its upper-case one. */
export const relayKeyNames: Record<string, readonly string[]> = keyNamesOf(
  relaySchema({ baseDir: '', dataDir: '' }).shape,
);

/** Environment variables that override relay.conf, per field: only LOG_LEVEL, shared with auth.conf. */
export const relayEnvNames: Record<string, string> = { logLevel: 'LOG_LEVEL' };

/** The validated relay.conf. */
export type RelayConfig = z.output<ReturnType<typeof relaySchema>> & {
  /** Keys found in the file that this version does not know (warned about, not fatal). */
  unknownKeys: string[];
  /** Which fields were set explicitly (so co-hosting knows what to inherit). */
  explicit: Set<string>;
};

/** Builds the relay configuration from relay.conf entries, environment overrides and defaults. */
export function buildRelayConfig(
  entries: readonly ConfEntry[],
  file: string,
  baseDir: string,
  dataDir: string,
  env: NodeJS.ProcessEnv = {},
): RelayConfig {
  const collected = collectKeys(entries, relayKeyNames, file);
  applyEnv(collected, relayEnvNames, env);
  const config = validateKeys(relaySchema({ baseDir, dataDir }), collected, file, relayKeyNames);
  checkMemoryBounds(config, collected, file);
  return {
    ...config,
    unknownKeys: unknownKeyLines(collected),
    explicit: new Set(Object.keys(collected.values)),
  };
}

/** The bounds on unsent frames must hold one message per receiver, and one receiver's bound. */
function checkMemoryBounds(
  config: { messageMaxBytes: number; maxQueuedBytes: number; maxMemoryBytes: number },
  collected: Collected,
  file: string,
): void {
  const problem = (field: string, message: string) => {
    const origin = collected.origins[field];
    const key = origin?.key ?? relayKeyNames[field]?.[0] ?? field;
    return new ConfigError(origin?.file ?? file, origin?.line, key, message);
  };
  const problems: ConfigError[] = [];
  if (config.maxQueuedBytes < config.messageMaxBytes) {
    problems.push(
      problem(
        'maxQueuedBytes',
        `must be at least message.maxBytes (${config.messageMaxBytes}): a receiver must be able to hold one message`,
      ),
    );
  }
  if (config.maxMemoryBytes < config.maxQueuedBytes) {
    problems.push(
      problem('maxMemoryBytes', `must be at least relay.maxQueuedBytes (${config.maxQueuedBytes})`),
    );
  }
  if (problems.length > 0) throw new ConfigProblems(problems);
}
