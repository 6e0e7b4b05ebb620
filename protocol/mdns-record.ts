import { z } from 'zod';

/** The DNS-SD service type: `_sync-host._tcp`. */
export const serviceType = 'sync-host';

/** TXT record of an advertised host, validated when discovered. */
export const hostTxtSchema = z.object({
  auth: z
    .string()
    .max(255)
    .regex(/^https?:\/\/[^\s/]+\S*$/, { error: 'must be an http(s) URL' }),
  relay: z
    .string()
    .max(255)
    .regex(/^wss?:\/\/[^\s/]+\S*$/, { error: 'must be a ws(s) URL' }),
  version: z
    .string()
    .max(64)
    .regex(/^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/, { error: 'must be a semver version' }),
  /** The certificate's fingerprint (SHA-256 of its public key, base64url) when the host speaks TLS. */
  fp: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43}$/, { error: 'must be a base64url SHA-256 fingerprint' })
    .optional(),
});

export type HostTxt = z.infer<typeof hostTxtSchema>;

/** A host found on the LAN. */
export interface DiscoveredHost {
  name: string;
  authUrl: string;
  relayUrl: string;
  version: string;
  /** The certificate's fingerprint when the host speaks TLS. */
  fingerprint?: string;
  /** Addresses the host answered from. */
  addresses: string[];
}

/** What an mDNS answer carries that a host is read from. */
export interface ServiceAnswer {
  name: string;
  txt?: unknown;
  addresses?: readonly string[];
}

/** Reads a found service; the problem as a string when its TXT record does not validate. */
export function toDiscoveredHost(service: ServiceAnswer): DiscoveredHost | string {
  const parsed = hostTxtSchema.safeParse(service.txt ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `TXT ${issue?.path.join('.') || 'record'} ${issue?.message ?? 'is invalid'}`;
  }
  return {
    name: service.name,
    authUrl: parsed.data.auth,
    relayUrl: parsed.data.relay,
    version: parsed.data.version,
    ...(parsed.data.fp === undefined ? {} : { fingerprint: parsed.data.fp }),
    addresses: [...(service.addresses ?? [])],
  };
}
