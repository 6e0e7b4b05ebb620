import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { lanAddress } from '../lan.ts';
import { authEnvNames, authKeyNames, authKeyValues } from './auth-config.ts';
import { readConfFile } from './conf-file.ts';
import { applyEnv, type Collected, collectKeys } from './keys.ts';
import { type LoadedConfig, loadConfig } from './load.ts';
import { relayEnvNames, relayKeyNames } from './relay-config.ts';

/** A value as `config check` shows it: text, a number, a switch, a list, or null when unset. */
export type ShownValue = string | number | boolean | string[] | null;

/** One key of the effective configuration, and where its value came from. */
export interface EffectiveEntry {
  /** The key's first spelling (`DB_PASS`, `rate.perSecond`). */
  key: string;
  /** The value the host uses; `****` for a secret; null when unset. */
  value: ShownValue;
  source: 'file' | 'env' | 'default';
  /** For `file`: the file and line, and the spelling used when it is not `key`. */
  file?: string;
  line?: number;
  spelling?: string;
  /** For `env`: the environment variable. */
  variable?: string;
  /** Set for a masked value, with the length of the real one. */
  secret?: true;
  length?: number;
  /** What an unset or inherited value becomes at start. */
  note?: string;
}

/** What `sync-host config check` reports: both files, every key, and the warnings. */
export interface EffectiveConfig {
  configDir: string;
  files: { auth: { path: string; found: boolean }; relay: { path: string; found: boolean } };
  auth: EffectiveEntry[];
  relay: EffectiveEntry[];
  warnings: string[];
}

/** Keys whose values are never shown: any spelling naming a secret, a password or NATS's token. */
const secretLike = /secret|pass|^cluster\.token$/i;

/** A URL's password (`nats://user:pw@host`) masked; other text unchanged. */
const maskUrlPassword = (text: string) => text.replace(/(\/\/[^/@\s:]*:)[^/@\s]+@/g, '$1****@');

/**
 * The configuration the host would run with, read from `configDir` and `env` exactly as at
 * start: the same validation, so a mistake throws the same ConfigError / ConfigProblems. Opens
 * no database and creates nothing (the data folder is only looked at, for its secret file).
 * Values are shown as the host uses them in `--headless` mode, where the relay takes some of
 * auth.conf's.
 */
export function effectiveConfig(
  configDir: string,
  env: NodeJS.ProcessEnv = process.env,
): EffectiveConfig {
  const loaded = loadConfig(configDir, env);
  const dir = loaded.configDir;
  const authCollected = collect(dir, 'auth.conf', authKeyNames, authEnvNames, env);
  const relayCollected = collect(dir, 'relay.conf', relayKeyNames, relayEnvNames, env);
  const authShown = authValues(loaded, authCollected);
  const relayShown = relayValues(loaded);
  const warnings = [...loaded.auth.unknownKeys, ...loaded.relay.unknownKeys].map(
    (line) => `unknown configuration key ignored: ${line}`,
  );
  const { secret } = loaded.relay;
  if (secret !== undefined && secret !== '' && loaded.auth.authSecret !== undefined) {
    if (secret !== loaded.auth.authSecret) {
      warnings.push(
        'relay.conf auth.secret differs from the auth service secret: devices will fail to authenticate with the relay',
      );
    }
  }
  if (secret === '') {
    warnings.push(
      'relay.conf auth.secret is empty: the relay does not check tokens (development only)',
    );
  }
  return {
    configDir: dir,
    files: {
      auth: { path: join(dir, 'auth.conf'), found: loaded.files.auth },
      relay: { path: join(dir, 'relay.conf'), found: loaded.files.relay },
    },
    auth: entries(authKeyNames, authCollected, authShown),
    relay: entries(relayKeyNames, relayCollected, relayShown),
    warnings,
  };
}

/** A file's entries and the environment, mapped onto fields as the loader does. */
function collect(
  dir: string,
  file: string,
  names: Record<string, readonly string[]>,
  envNames: Record<string, string>,
  env: NodeJS.ProcessEnv,
): Collected {
  const collected = collectKeys(readConfFile(join(dir, file), file) ?? [], names, file);
  applyEnv(collected, envNames, env);
  return collected;
}

type Shown = Record<string, { value: unknown; note?: string }>;

/** auth.conf's fields as the host uses them, with what an unset one becomes. */
function authValues(loaded: LoadedConfig, collected: Collected): Shown {
  const { auth } = loaded;
  const keys: Record<string, unknown> = { ...authKeyValues(collected.values) };
  const shown: Shown = {};
  for (const [field, value] of Object.entries(keys)) shown[field] = { value };
  const { db } = auth;
  shown.dataDir = { value: auth.dataDir };
  shown.dbDriver = { value: db.driver };
  if (db.driver === 'sqlite') {
    shown.dbHost = { value: undefined, note: 'embedded SQLite' };
    shown.dbPath = { value: db.path };
    shown.dbPort = { value: undefined, note: 'not used with SQLite' };
  } else {
    shown.dbPort = { value: db.port };
    shown.dbPath = { value: undefined, note: `not used: the database is on ${db.host}` };
  }
  if (auth.authSecret === undefined) {
    const file = join(auth.dataDir, 'secret');
    shown.authSecret = {
      value: undefined,
      note: existsSync(file) ? `generated, in ${file}` : `generated at first start into ${file}`,
    };
  }
  const lan = lanAddress(auth.bind);
  if (auth.authBaseUrl === undefined) {
    shown.authBaseUrl = { value: `http://${lan}:${auth.port}`, note: 'from BIND and PORT' };
  }
  if (auth.relayUrl === undefined) {
    const relayBind = loaded.relay.explicit.has('bind') ? loaded.relay.bind : auth.bind;
    shown.relayUrl = {
      value: `ws://${lanAddress(relayBind)}:${loaded.relay.wsPort}`,
      note: "from the relay's address and ws.port",
    };
  }
  if (auth.smtp === undefined) {
    shown.smtpHost = {
      value: undefined,
      note: 'development mode: login links are printed on stdout and shown in the admin UI',
    };
    shown.smtpFrom = { value: undefined, note: 'not used without SMTP_HOST' };
  } else {
    shown.smtpFrom = { value: auth.smtp.from };
  }
  if (auth.ownerEmail === undefined)
    shown.ownerEmail = { value: undefined, note: 'the first user' };
  return shown;
}

/** relay.conf's fields as a co-hosted relay uses them (some taken from auth.conf). */
function relayValues(loaded: LoadedConfig): Shown {
  const { relay, auth } = loaded;
  const shown: Shown = {};
  for (const [field, value] of Object.entries(relay)) shown[field] = { value };
  const inherited = (field: string, value: unknown, from: string, alone: string) => {
    if (relay.explicit.has(field)) return;
    shown[field] = {
      value,
      note: `co-hosted: auth.conf's ${from}; sync-host relay alone: ${alone}`,
    };
  };
  inherited('bind', auth.bind, 'BIND', '0.0.0.0');
  inherited('tokenSignature', auth.tokenSignature, 'TOKEN_SIGNATURE', 'hmac-sha256');
  inherited('trustProxy', auth.trustProxy, 'TRUST_PROXY', 'none');
  if (relay.secret === undefined) {
    shown.secret = { value: undefined, note: "co-hosted: the auth service's secret" };
  }
  if (relay.clusterNode === undefined && relay.clusterNats.length > 0) {
    shown.clusterNode = { value: undefined, note: 'host name and ws.port' };
  }
  return shown;
}

/** One entry per key, in the schema's order, with its source and its value masked if secret. */
function entries(
  names: Record<string, readonly string[]>,
  collected: Collected,
  shown: Shown,
): EffectiveEntry[] {
  return Object.entries(names).map(([field, spellings]) => {
    const key = spellings[0] ?? field;
    const origin = collected.origins[field];
    const entry: EffectiveEntry = { key, value: null, source: 'default' };
    if (origin?.line !== undefined) {
      Object.assign(entry, { source: 'file', file: origin.file, line: origin.line });
      if (origin.key !== key) entry.spelling = origin.key;
    } else if (origin !== undefined) {
      Object.assign(entry, { source: 'env', variable: origin.key });
    }
    const { value, note } = shown[field] ?? { value: undefined };
    if (note !== undefined) entry.note = note;
    if (spellings.some((s) => secretLike.test(s)) && typeof value === 'string') {
      Object.assign(entry, { value: '****', secret: true, length: value.length });
      return entry;
    }
    entry.value = showable(value);
    return entry;
  });
}

function showable(value: unknown): ShownValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return maskUrlPassword(value);
  if (typeof value === 'number' || typeof value === 'boolean') return value;
  if (Array.isArray(value)) return value.map((item) => maskUrlPassword(String(item)));
  return maskUrlPassword(String(value));
}
