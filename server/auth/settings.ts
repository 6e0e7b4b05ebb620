import type { Tier } from '../../protocol/tiers.ts';
import type { TokenSignature } from '../config/common.ts';

/** What the auth service is told by its configuration, once, at start. */
export interface AuthSettings {
  secret: string;
  tokenSignature: TokenSignature;
  /** Public base URL; links are `<baseUrl>/auth/verify?token=<token>`. */
  baseUrl: string;
  defaultTier: Tier;
  signup: 'open' | 'allowlist';
  /** Lower-case addresses and `*@domain` patterns. */
  allowedEmails: readonly string[];
  /** Devices one user may have at most (DEVICE_LIMIT). */
  deviceLimit: number;
  /** The owner's address (OWNER_EMAIL); undefined: the first user is the owner. */
  ownerEmail?: string | undefined;
}
