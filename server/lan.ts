import { networkInterfaces } from 'node:os';

/** The address clients on the LAN reach this host at: BIND when specific, else the first LAN IPv4. */
export function lanAddress(bind: string): string {
  if (bind !== '0.0.0.0' && bind !== '::' && bind !== '')
    return bind.includes(':') ? `[${bind}]` : bind;
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}
