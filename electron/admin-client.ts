/**
 * The admin API as the tray app uses it: HTTP to the host's own auth port on loopback, with the
 * admin token in the Authorization header. No Electron import, so it is tested against a real
 * host without Electron. The tray does what the admin UI does, through the same checks and logs.
 */
import { createAdminCall } from '../renderer/admin-call.ts';
import type { AdminPairing, AdminUser } from '../server/admin/types.ts';

/** The calls the tray needs. */
export interface TrayAdminApi {
  pairings(): Promise<AdminPairing[]>;
  users(): Promise<AdminUser[]>;
  /** Approves for `email` (the pairing's own e-mail when omitted). */
  approvePairing(
    code: string,
    email?: string,
  ): Promise<{ device: { id: number }; user: AdminUser }>;
  denyPairing(code: string): Promise<void>;
}

/**
 * An admin API client for `base` (`http://127.0.0.1:<auth port>`, or https:// with TLS, reached
 * through `fetch`: pinned to the host's own certificate).
 */
export function createTrayAdminApi(
  base: () => string,
  adminToken: () => string,
  fetch?: () => typeof globalThis.fetch | undefined,
): TrayAdminApi {
  const call = createAdminCall({
    base,
    token: adminToken,
    fetch,
    unreachable: (err) =>
      `the host's admin API cannot be reached (${err instanceof Error ? err.message : String(err)})`,
  });
  return {
    pairings: async () => (await call<{ pairings: AdminPairing[] }>('GET', '/pairings')).pairings,
    users: async () => (await call<{ users: AdminUser[] }>('GET', '/users')).users,
    approvePairing: (code, email) =>
      call('POST', '/pairings/approve', email === undefined ? { code } : { code, email }),
    denyPairing: (code) => call<void>('POST', '/pairings/deny', { code }),
  };
}
