import { resolve } from 'node:path';
import { z } from 'zod';
import {
  bindSchema,
  type LogLevel,
  logLevelSchema,
  portSchema,
  switchSchema,
  type TokenSignature,
  tokenSignatureSchema,
} from './common.ts';
import type { ConfEntry } from './conf-file.ts';
import { applyEnv, collectKeys, validateKeys } from './keys.ts';

export const tiers = ['free', 'personal', 'pro', 'team'] as const;
export type Tier = (typeof tiers)[number];

/** Every accepted spelling of every auth.conf key, per field. */
export const authKeyNames = {
  dbHost: ['DB_HOST', 'db.host'],
  dbUser: ['DB_USER', 'db.user'],
  dbPass: ['DB_PASS', 'DB_PASSWORD', 'db.password', 'db.pass'],
  dbName: ['DB_NAME', 'db.name'],
  dbDriver: ['DB_DRIVER', 'db.driver'],
  dbPort: ['DB_PORT', 'db.port'],
  dbPath: ['DB_PATH', 'db.path'],
  port: ['PORT', 'port'],
  authSecret: ['AUTH_SECRET', 'auth.secret'],
  authBaseUrl: ['AUTH_BASE_URL', 'auth.baseUrl', 'auth.base.url', 'auth.base_url'],
  smtpHost: ['SMTP_HOST', 'smtp.host'],
  smtpPort: ['SMTP_PORT', 'smtp.port'],
  smtpUser: ['SMTP_USER', 'smtp.user'],
  smtpPass: ['SMTP_PASS', 'SMTP_PASSWORD', 'smtp.password', 'smtp.pass'],
  smtpFrom: ['SMTP_FROM', 'smtp.from'],
  dataDir: ['DATA_DIR', 'data.dir'],
  bind: ['BIND', 'bind'],
  defaultTier: ['DEFAULT_TIER', 'default.tier'],
  tokenSignature: ['TOKEN_SIGNATURE', 'token.signature'],
  mdns: ['MDNS', 'mdns'],
  relayUrl: ['RELAY_URL', 'relay.url'],
  signup: ['SIGNUP', 'signup'],
  allowedEmails: ['ALLOWED_EMAILS', 'allowed.emails'],
  logLevel: ['LOG_LEVEL', 'log.level'],
} as const satisfies Record<string, readonly string[]>;

/** Environment variables that override auth.conf (the upper-case key names). */
const authEnvNames: Record<string, string> = Object.fromEntries(
  Object.entries(authKeyNames).map(([field, names]) => [field, names[0]]),
);

const optionalText = z.string().trim().optional();
const httpUrl = z
  .string()
  .trim()
  .refine((v) => /^https?:\/\/[^\s/]+/.test(v), { error: 'must be an http:// or https:// URL' })
  .transform((v) => v.replace(/\/+$/, ''));
const wsUrl = z
  .string()
  .trim()
  .refine((v) => /^wss?:\/\/[^\s/]+/.test(v), { error: 'must be a ws:// or wss:// URL' });

const authSchema = z
  .object({
    dbHost: optionalText.transform((v) => (v === '' ? undefined : v)),
    dbUser: optionalText,
    dbPass: z.string().optional(),
    dbName: optionalText,
    dbDriver: z
      .string()
      .trim()
      .toLowerCase()
      .transform((v) => (v === 'mariadb' ? 'mysql' : v === 'postgresql' ? 'postgres' : v))
      .pipe(z.enum(['sqlite', 'postgres', 'mysql'], { error: 'must be sqlite, postgres or mysql' }))
      .optional(),
    dbPort: portSchema.optional(),
    dbPath: z.string().trim().min(1).optional(),
    /** Auth HTTP port (also serves the admin UI). Default 8445. */
    port: portSchema.default(8445),
    /** Shared secret for JWTs, device tokens and room ids; generated when absent without DB_HOST. */
    authSecret: z.string().optional(),
    /** Public URL of the auth service used in magic links. Default http://<lan address>:<PORT>. */
    authBaseUrl: httpUrl.optional(),
    smtpHost: optionalText.transform((v) => (v === '' ? undefined : v)),
    /** SMTP port, default 587. */
    smtpPort: portSchema.default(587),
    smtpUser: optionalText,
    smtpPass: z.string().optional(),
    smtpFrom: optionalText,
    /** Folder for generated files (secret, admin token, SQLite databases). Default ./data. */
    dataDir: z.string().trim().min(1).default('./data'),
    /** Listen address of every port. Default 0.0.0.0. */
    bind: bindSchema.default('0.0.0.0'),
    /** Tier given to new users. Default free. */
    defaultTier: z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(tiers, { error: 'must be free, personal, pro or team' }))
      .default('free'),
    /** Device-token signature: hmac-sha256 (default) or djb2 (compatibility, forgeable). */
    tokenSignature: tokenSignatureSchema.default('hmac-sha256'),
    /** Advertise the host on the LAN over mDNS. Default on. */
    mdns: switchSchema.default(true),
    /** Relay address advertised to clients. Default ws://<lan address>:8443. */
    relayUrl: wsUrl.optional(),
    /** open, or allowlist: only ALLOWED_EMAILS and invited users get a link. */
    signup: z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['open', 'allowlist'], { error: 'must be open or allowlist' }))
      .default('open'),
    /** Comma-separated addresses and *@domain patterns. */
    allowedEmails: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim().toLowerCase())
          .filter((s) => s !== ''),
      ),
    logLevel: logLevelSchema.default('info'),
  })
  .superRefine((c, ctx) => {
    const driver = c.dbDriver ?? (c.dbHost === undefined ? 'sqlite' : 'postgres');
    if (driver !== 'sqlite' && c.dbHost === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['dbDriver'],
        message: `${driver} needs DB_HOST (the database server's host name)`,
      });
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
  });

export type DbDriver = 'sqlite' | 'postgres' | 'mysql';

/** The validated auth.conf, with defaults applied and paths made absolute. */
export interface AuthConfig {
  db: DbConfig;
  port: number;
  /** From the file or environment; undefined until the host fills it with the generated one. */
  authSecret: string | undefined;
  authBaseUrl: string | undefined;
  smtp: SmtpConfig | undefined;
  dataDir: string;
  bind: string;
  defaultTier: Tier;
  tokenSignature: TokenSignature;
  mdns: boolean;
  relayUrl: string | undefined;
  signup: 'open' | 'allowlist';
  allowedEmails: string[];
  logLevel: LogLevel;
  /** Keys found in the file that this version does not know (warned about, not fatal). */
  unknownKeys: string[];
}

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
  const c = validateKeys(authSchema, collected, file, authKeyNames);
  const dataDir = resolve(baseDir, c.dataDir);
  const driver: DbDriver = c.dbDriver ?? (c.dbHost === undefined ? 'sqlite' : 'postgres');
  const db: DbConfig =
    driver === 'sqlite'
      ? { driver, path: c.dbPath ? resolve(baseDir, c.dbPath) : resolve(dataDir, 'auth.db') }
      : {
          driver,
          host: c.dbHost ?? '',
          port: c.dbPort ?? (driver === 'postgres' ? 5432 : 3306),
          user: c.dbUser ?? '',
          password: c.dbPass ?? '',
          database: c.dbName ?? '',
        };
  return {
    db,
    port: c.port,
    authSecret: c.authSecret === '' ? undefined : c.authSecret,
    authBaseUrl: c.authBaseUrl,
    smtp:
      c.smtpHost === undefined
        ? undefined
        : {
            host: c.smtpHost,
            port: c.smtpPort,
            user: c.smtpUser || undefined,
            password: c.smtpPass || undefined,
            from: c.smtpFrom || `sync-host <no-reply@${c.smtpHost}>`,
          },
    dataDir,
    bind: c.bind,
    defaultTier: c.defaultTier,
    tokenSignature: c.tokenSignature,
    mdns: c.mdns,
    relayUrl: c.relayUrl,
    signup: c.signup,
    allowedEmails: c.allowedEmails,
    logLevel: c.logLevel,
    unknownKeys: collected.unknown.map((u) => `${u.file}:${u.line}: ${u.key}`),
  };
}
