import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * A TCP port, 1–65535 (0 is accepted so tests can ask for an ephemeral port). A blank value
 * (`PORT=`) is refused: read as a number it would be 0, an ephemeral port nobody could find.
 */
export const portSchema = z.preprocess(
  (value) => (typeof value === 'string' && value.trim() === '' ? undefined : value),
  z.coerce
    .number({ error: 'must be a port number' })
    .int({ error: 'must be a whole port number' })
    .min(0, { error: 'must be a port number between 1 and 65535' })
    .max(65_535, { error: 'must be a port number between 1 and 65535' }),
);

/** A positive whole number. */
export const positiveInt = (what: string) =>
  z.coerce
    .number({ error: `must be ${what}` })
    .int({ error: `must be a whole number (${what})` })
    .positive({ error: `must be positive (${what})` });

/** `on`/`off` style switches. */
export const switchSchema = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(
    z.enum(['on', 'off', 'true', 'false', 'yes', 'no', '1', '0'], { error: 'must be on or off' }),
  )
  .transform((v) => v === 'on' || v === 'true' || v === 'yes' || v === '1');

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

export const logLevelSchema = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(logLevels, { error: `must be one of ${logLevels.join(', ')}` }));

export const tokenSignatures = ['hmac-sha256', 'djb2'] as const;
export type TokenSignature = (typeof tokenSignatures)[number];

export const tokenSignatureSchema = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(tokenSignatures, { error: 'must be hmac-sha256 or djb2' }));

/** A listen address: an IPv4 or IPv6 literal, or a host name. */
export const bindSchema = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9.:_-]+$/, { error: 'must be an IP address or host name' });

/** A comma-separated list of `item`s; spaces around each are ignored, empty entries dropped. */
export function commaListSchema<Item extends z.ZodType<unknown, string>>(item: Item) {
  return z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    )
    .pipe(z.array(item));
}

/**
 * NATS server URLs, comma-separated (`nats://host:port`, `tls://host:port` or `host:port`);
 * empty: no NATS.
 */
export const natsUrlsSchema = commaListSchema(
  z.string().regex(/^((nats|tls):\/\/)?[^\s/:,]+(:\d{1,5})?$/, {
    error: 'must be NATS server URLs, comma-separated (nats://host:4222)',
  }),
);

/** An http:// or https:// URL, without trailing slashes. */
export const httpUrl = z
  .string()
  .trim()
  .refine((v) => /^https?:\/\/[^\s/]+/.test(v), { error: 'must be an http:// or https:// URL' })
  .transform((v) => v.replace(/\/+$/, ''));

/** An IPv4/IPv6 address, optionally with a /prefix length that fits it. */
function isAddressOrCidr(value: string): boolean {
  const [address = '', prefix, extra] = value.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/**
 * Reverse proxies whose X-Forwarded-For gives the client address (rate limits, per-address
 * limits, logs): addresses or CIDRs, comma-separated. Empty: no proxy is trusted.
 */
export const trustProxySchema = commaListSchema(
  z.string().refine(isAddressOrCidr, {
    error: 'must list IP addresses or CIDRs (e.g. 127.0.0.1, 10.0.0.0/8), comma-separated',
  }),
).default([]);
