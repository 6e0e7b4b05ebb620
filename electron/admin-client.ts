/**
 * The admin API as the tray app uses it: HTTP to the host's own auth port on loopback, with the
 * admin token in the Authorization header. No Electron import, so it is tested against a real
 * host without Electron. The tray does what the admin UI does, through the same checks and logs.
 */
import type { AdminPairing, AdminUser } from '../server/admin/types.ts';

/** A refused or failed admin API call; `code` is the API's error code (`unreachable` when down). */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'AdminApiError';
  }
}

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

/** An admin API client for `base` (`http://127.0.0.1:<auth port>`). */
export function createTrayAdminApi(base: () => string, adminToken: () => string): TrayAdminApi {
  async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${base()}/admin/api${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${adminToken()}`,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err: unknown) {
      throw new AdminApiError(
        0,
        'unreachable',
        `the host's admin API cannot be reached (${err instanceof Error ? err.message : String(err)})`,
      );
    }
    if (res.status === 204) return undefined as T;
    const data: unknown = await res.json().catch(() => undefined);
    if (!res.ok) {
      const error = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new AdminApiError(
        res.status,
        error?.code ?? 'error',
        error?.message ?? `request failed (${res.status})`,
      );
    }
    return data as T;
  }
  return {
    pairings: async () => (await call<{ pairings: AdminPairing[] }>('GET', '/pairings')).pairings,
    users: async () => (await call<{ users: AdminUser[] }>('GET', '/users')).users,
    approvePairing: (code, email) =>
      call('POST', '/pairings/approve', email === undefined ? { code } : { code, email }),
    denyPairing: (code) => call<void>('POST', '/pairings/deny', { code }),
  };
}
