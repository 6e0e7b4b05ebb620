import { z } from 'zod';
import { parseFingerprint } from '../protocol/fingerprint.ts';
import { SettingsError } from './errors.ts';

const wsUrl = /^wss?:\/\/[^\s/?#]+(?:[/?#]\S*)?$/i;
const httpUrl = /^https?:\/\/[^\s/?#]+(?:[/?#]\S*)?$/i;
const deviceToken = /^\d+:\d+:\d+\.[0-9a-f]+$/;

/** The client settings: the four of every client, with their defaults, and an optional pin. */
export const settingsSchema = z.strictObject({
  /** Enables cross-device sync. Default false: nothing connects while it is false. */
  syncEnabled: z.boolean({ error: 'must be true or false' }).default(false),
  /** Relay WebSocket address, `ws://` or `wss://`. Default `ws://localhost:8443` (the host's default port). */
  syncRelayUrl: z
    .string({ error: 'must be a string' })
    .trim()
    .regex(wsUrl, { error: 'must be a ws:// or wss:// URL' })
    .default('ws://localhost:8443'),
  /** Auth service address, `http://` or `https://`. Default `http://localhost:8445`. */
  syncAuthUrl: z
    .string({ error: 'must be a string' })
    .trim()
    .regex(httpUrl, { error: 'must be an http:// or https:// URL' })
    .default('http://localhost:8445'),
  /** Device token stored after login; '' (the default) until the user signs in. */
  syncDeviceToken: z
    .string({ error: 'must be a string' })
    .trim()
    .refine((value) => value === '' || deviceToken.test(value), {
      error: 'must be empty or a device token (<userId>:<deviceId>:<timestamp>.<hash>)',
    })
    .default(''),
  /**
   * The host certificate's fingerprint (SHA-256 of its public key, base64url or hex) to pin in
   * Node; absent: the platform's usual certificate checks. Browsers ignore it (their own trust
   * decides).
   */
  syncFingerprint: z
    .string({ error: 'must be a string' })
    .transform((value, ctx) => {
      const parsed = parseFingerprint(value);
      if (parsed === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be a SHA-256 fingerprint (base64url or hex)',
        });
        return z.NEVER;
      }
      return parsed;
    })
    .optional(),
});

/** Validated settings. */
export type SyncSettings = z.infer<typeof settingsSchema>;

/** Settings as a caller writes them: every key optional, defaults fill the rest. */
export type SyncSettingsInput = z.input<typeof settingsSchema>;

/** The defaults: sync off, the host's default local ports, no device token. */
export const defaultSettings: Readonly<SyncSettings> = Object.freeze(settingsSchema.parse({}));

/**
 * Validates settings and fills in the defaults. Throws a `SettingsError` naming every setting
 * that is wrong, e.g. `syncRelayUrl must be a ws:// or wss:// URL`.
 */
export function parseSettings(input: unknown = {}): SyncSettings {
  const parsed = settingsSchema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return `unknown setting ${issue.keys.map((key) => `"${key}"`).join(', ')} (expected syncEnabled, syncRelayUrl, syncAuthUrl, syncDeviceToken, syncFingerprint)`;
    }
    const key = issue.path.join('.');
    return key === '' ? 'settings must be an object' : `${key} ${issue.message}`;
  });
  throw new SettingsError(problems.join('; '));
}

/** The user and device ids inside a device token, or undefined for '' and malformed tokens. */
export function deviceTokenIds(token: string): { userId: number; deviceId: number } | undefined {
  if (!deviceToken.test(token)) return undefined;
  const [userId, deviceId] = token.split(':');
  return { userId: Number(userId), deviceId: Number(deviceId) };
}
