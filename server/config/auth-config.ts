import { resolve } from 'node:path';
import { z } from 'zod';
import { tiers } from '../../protocol/tiers.ts';
import {
  bindSchema,
  httpUrl,
  logLevelSchema,
  natsUrlsSchema,
  portSchema,
  positiveInt,
  switchSchema,
  tokenSignatureSchema,
  trustProxySchema,
} from './common.ts';
import type { ConfEntry } from './conf-file.ts';
import {
  applyEnv,
  collectKeys,
  configKey,
  keyNamesOf,
  unknownKeyLines,
  validateKeys,
} from './keys.ts';
import { natsAccessKeys, refineNatsAccess } from './nats-access.ts';
import { sharedSecretSchema } from './secret-strength.ts';

const dbDrivers = ['sqlite', 'postgres', 'mysql'] as const;
export const tlsModes = ['off', 'self-signed', 'files'] as const;

const wsUrl = z
  .string()
  .trim()
  .refine((v) => /^wss?:\/\/[^\s/]+/.test(v), { error: 'must be a ws:// or wss:// URL' });
const optionalText = () => z.string().trim().optional();
const absentWhenEmpty = (v: string | undefined) => (v === '' ? undefined : v);

/** The auth.conf keys: each once, with every accepted spelling (the first names it in messages). */
const authKeys = {
  /** Database server; set, it selects PostgreSQL (or DB_DRIVER) instead of embedded SQLite. */
  dbHost: configKey(optionalText().transform(absentWhenEmpty), 'DB_HOST', 'db.host'),
  dbUser: configKey(optionalText(), 'DB_USER', 'db.user'),
  dbPass: configKey(z.string().optional(), 'DB_PASS', 'DB_PASSWORD', 'db.password', 'db.pass'),
  dbName: configKey(optionalText(), 'DB_NAME', 'db.name'),
  /** sqlite, postgres (also postgresql) or mysql (also mariadb). */
  dbDriver: configKey(
    z
      .string()
      .trim()
      .toLowerCase()
      .transform((v) => (v === 'mariadb' ? 'mysql' : v === 'postgresql' ? 'postgres' : v))
      .pipe(z.enum(dbDrivers, { error: 'must be sqlite, postgres or mysql' }))
      .optional(),
    'DB_DRIVER',
    'db.driver',
  ),
  /** Database port. Default 5432 (postgres) or 3306 (mysql). */
  dbPort: configKey(portSchema.optional(), 'DB_PORT', 'db.port'),
  /** SQLite file. Default <DATA_DIR>/auth.db. */
  dbPath: configKey(z.string().trim().min(1).optional(), 'DB_PATH', 'db.path'),
  /** Auth HTTP port (also serves the admin UI). Default 8445. */
  port: configKey(portSchema.default(8445), 'PORT', 'port'),
  /** Shared secret for JWTs, device tokens and room ids; generated when absent without DB_HOST. */
  authSecret: configKey(sharedSecretSchema, 'AUTH_SECRET', 'auth.secret'),
  /** Public URL of the auth service used in magic links. Default http://<lan address>:<PORT>. */
  authBaseUrl: configKey(
    httpUrl.optional(),
    'AUTH_BASE_URL',
    'auth.baseUrl',
    'auth.base.url',
    'auth.base_url',
  ),
  /** SMTP server; without it the host is in development mode (links printed on stdout). */
  smtpHost: configKey(optionalText().transform(absentWhenEmpty), 'SMTP_HOST', 'smtp.host'),
  /** SMTP port, default 587. */
  smtpPort: configKey(portSchema.default(587), 'SMTP_PORT', 'smtp.port'),
  smtpUser: configKey(optionalText(), 'SMTP_USER', 'smtp.user'),
  smtpPass: configKey(
    z.string().optional(),
    'SMTP_PASS',
    'SMTP_PASSWORD',
    'smtp.password',
    'smtp.pass',
  ),
  /** Sender of login mails. Default `sync-host <no-reply@<SMTP_HOST>>`. */
  smtpFrom: configKey(optionalText(), 'SMTP_FROM', 'smtp.from'),
  /** Folder for generated files (secret, admin token, SQLite databases). Default ./data. */
  dataDir: configKey(z.string().trim().min(1).default('./data'), 'DATA_DIR', 'data.dir'),
  /** Listen address of every port. Default 0.0.0.0. */
  bind: configKey(bindSchema.default('0.0.0.0'), 'BIND', 'bind'),
  /** Tier given to new users. Default free. */
  defaultTier: configKey(
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(tiers, { error: 'must be free, personal, pro or team' }))
      .default('free'),
    'DEFAULT_TIER',
    'default.tier',
  ),
  /** Device-token signature: hmac-sha256 (default) or djb2 (compatibility, forgeable). */
  tokenSignature: configKey(
    tokenSignatureSchema.default('hmac-sha256'),
    'TOKEN_SIGNATURE',
    'token.signature',
  ),
  /** Advertise the host on the LAN over mDNS. Default on. */
  mdns: configKey(switchSchema.default(true), 'MDNS', 'mdns'),
  /** Relay address advertised to clients. Default ws://<lan address>:8443. */
  relayUrl: configKey(wsUrl.optional(), 'RELAY_URL', 'relay.url'),
  /** open, or allowlist: only ALLOWED_EMAILS and invited users get a link. */
  signup: configKey(
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['open', 'allowlist'], { error: 'must be open or allowlist' }))
      .default('open'),
    'SIGNUP',
    'signup',
  ),
  /** Comma-separated addresses and *@domain patterns. */
  allowedEmails: configKey(
    z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim().toLowerCase())
          .filter((s) => s !== ''),
      ),
    'ALLOWED_EMAILS',
    'allowed.emails',
  ),
  /** The host's owner (tier pro whatever DEFAULT_TIER says). Default empty: the first user. */
  ownerEmail: configKey(
    z
      .string()
      .trim()
      .toLowerCase()
      .transform(absentWhenEmpty)
      .pipe(z.email({ error: 'must be an e-mail address' }).optional())
      .optional(),
    'OWNER_EMAIL',
    'owner.email',
  ),
  /**
   * Comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For gives the
   * client address (rate limits, logs). Default empty: no proxy is trusted.
   */
  trustProxy: configKey(trustProxySchema, 'TRUST_PROXY', 'trust.proxy'),
  logLevel: configKey(logLevelSchema.default('info'), 'LOG_LEVEL', 'log.level'),
  /** NATS server URLs, comma-separated: device revocations are published there for every relay node. */
  clusterNats: configKey(natsUrlsSchema.default([]), 'CLUSTER_NATS', 'cluster.nats'),
  /** How this process signs in to NATS and checks its TLS certificate (nats-access.ts). */
  ...natsAccessKeys('upper'),
  /**
   * off, self-signed (a certificate made on first start in DATA_DIR) or files (TLS_CERT and
   * TLS_KEY). Default: self-signed for the all-in-one host, off for `auth` run on its own.
   */
  tls: configKey(
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(tlsModes, { error: 'must be off, self-signed or files' }))
      .optional(),
    'TLS',
    'tls',
  ),
  /** PEM certificate (with its chain) when TLS=files. */
  tlsCert: configKey(z.string().trim().min(1).optional(), 'TLS_CERT', 'tls.cert'),
  /** PEM private key of TLS_CERT when TLS=files. */
  tlsKey: configKey(z.string().trim().min(1).optional(), 'TLS_KEY', 'tls.key'),
  /** Devices one user may have at most. Default 100. */
  deviceLimit: configKey(
    positiveInt('the most devices one user may have').default(100),
    'DEVICE_LIMIT',
    'device.limit',
  ),
};

/** Every accepted spelling of every auth.conf key, per field. */
export const authKeyNames: Record<string, readonly string[]> = keyNamesOf(authKeys);

/** Environment variables that override auth.conf (the upper-case key names), per field. */
export const authEnvNames: Record<string, string> = Object.fromEntries(
  Object.entries(authKeyNames).map(([field, names]) => [field, names[0] ?? field]),
);

type AuthKeys = z.output<z.ZodObject<typeof authKeys>>;

/**
 * Each auth.conf key's value, parsed with its default, before the database and SMTP keys are
 * folded into their settings (what `sync-host config check` shows). Throws on an invalid value:
 * call it on values `buildAuthConfig` accepted.
 */
export function authKeyValues(values: Readonly<Record<string, string>>): AuthKeys {
  return z.object(authKeys).parse(values);
}

/** Refuses a database server configured without what it needs, one problem per missing key. */
function checkDatabaseKeys(c: AuthKeys, ctx: z.RefinementCtx): void {
  const driver = c.dbDriver ?? (c.dbHost === undefined ? 'sqlite' : 'postgres');
  if (driver !== 'sqlite' && c.dbHost === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['dbDriver'],
      message: `${driver} needs DB_HOST (the database server's host name)`,
    });
  }
  if (c.tls === 'files') {
    for (const [field, key] of [
      ['tlsCert', 'TLS_CERT'],
      ['tlsKey', 'TLS_KEY'],
    ] as const) {
      if (c[field] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `${key} is required when TLS=files`,
        });
      }
    }
  }
  if (c.dbHost === undefined) return;
  const required: Array<[keyof typeof c, string]> = [
    ['dbUser', 'DB_USER'],
    ['dbName', 'DB_NAME'],
    ['authSecret', 'AUTH_SECRET'],
    ['authBaseUrl', 'AUTH_BASE_URL'],
  ];
  for (const [field, key] of required) {
    const value = c[field];
    if (value === undefined || value === '') {
      ctx.addIssue({
        code: 'custom',
        path: [field],
        message: `${key} is required when DB_HOST is set`,
      });
    }
  }
  if (c.dbPass === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['dbPass'],
      message: 'DB_PASS is required when DB_HOST is set (it may be empty: DB_PASS=)',
    });
  }
}

/** The database and SMTP keys folded into their settings, paths made absolute against `baseDir`. */
function settle(c: AuthKeys, baseDir: string) {
  const {
    dbHost,
    dbUser,
    dbPass,
    dbName,
    dbDriver,
    dbPort,
    dbPath,
    smtpHost,
    smtpPort,
    smtpUser,
    smtpPass,
    smtpFrom,
    ...rest
  } = c;
  const dataDir = resolve(baseDir, rest.dataDir);
  const driver = dbDriver ?? (dbHost === undefined ? 'sqlite' : 'postgres');
  const db: DbConfig =
    driver === 'sqlite'
      ? { driver, path: dbPath ? resolve(baseDir, dbPath) : resolve(dataDir, 'auth.db') }
      : {
          driver,
          host: dbHost ?? '',
          port: dbPort ?? (driver === 'postgres' ? 5432 : 3306),
          user: dbUser ?? '',
          password: dbPass ?? '',
          database: dbName ?? '',
        };
  const smtp: SmtpConfig | undefined =
    smtpHost === undefined
      ? undefined
      : {
          host: smtpHost,
          port: smtpPort,
          user: smtpUser || undefined,
          password: smtpPass || undefined,
          from: smtpFrom || `sync-host <no-reply@${smtpHost}>`,
        };
  // Empty counts as absent: the host then fills in the generated secret.
  const authSecret = rest.authSecret === '' ? undefined : rest.authSecret;
  const tlsCert = rest.tlsCert === undefined ? undefined : resolve(baseDir, rest.tlsCert);
  const tlsKey = rest.tlsKey === undefined ? undefined : resolve(baseDir, rest.tlsKey);
  return { ...rest, db, smtp, dataDir, authSecret, tlsCert, tlsKey };
}

/** The auth.conf schema: the keys, their cross-checks, and the settings they make. */
const authSchema = (baseDir: string) =>
  z
    .object(authKeys)
    .superRefine(checkDatabaseKeys)
    .superRefine(refineNatsAccess(authKeyNames))
    .transform((c) => settle(c, baseDir));

export type DbDriver = (typeof dbDrivers)[number];

/** The validated auth.conf, with defaults applied and paths made absolute. */
export type AuthConfig = z.output<ReturnType<typeof authSchema>> & {
  /** Keys found in the file that this version does not know (warned about, not fatal). */
  unknownKeys: string[];
};

export type DbConfig =
  | { driver: 'sqlite'; path: string }
  | {
      driver: 'postgres' | 'mysql';
      host: string;
      port: number;
      user: string;
      password: string;
      database: string;
    };

export interface SmtpConfig {
  host: string;
  port: number;
  user: string | undefined;
  password: string | undefined;
  from: string;
}

/**
 * Builds the auth configuration from the entries of auth.conf (none when the file is absent),
 * environment overrides and defaults. Relative paths are resolved against `baseDir`.
 */
export function buildAuthConfig(
  entries: readonly ConfEntry[],
  file: string,
  baseDir: string,
  env: NodeJS.ProcessEnv = {},
): AuthConfig {
  const collected = collectKeys(entries, authKeyNames, file);
  applyEnv(collected, authEnvNames, env);
  return {
    ...validateKeys(authSchema(baseDir), collected, file, authKeyNames),
    unknownKeys: unknownKeyLines(collected),
  };
}
