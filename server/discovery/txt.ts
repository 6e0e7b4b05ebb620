import { z } from 'zod';

/** The DNS-SD service type: `_sync-host._tcp`. */
export const serviceType = 'sync-host';

/** TXT record of an advertised host (contract section 7), validated when discovered. */
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
});

export type HostTxt = z.infer<typeof hostTxtSchema>;
