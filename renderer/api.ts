import type { AdminDevice, AdminOverview, AdminUser } from '../server/admin/types.ts';

/** A failed admin API call: `status` 0 when the host could not be reached. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The admin API as the UI uses it; the token goes in the Authorization header only. */
export function createAdminApi(token: string) {
  async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`/admin/api${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
      });
    } catch {
      throw new ApiError(0, 'unreachable', 'Cannot reach the sync host. Is it still running?');
    }
    if (res.status === 204) return undefined as T;
    const data: unknown = await res.json().catch(() => undefined);
    if (!res.ok) {
      const error = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new ApiError(
        res.status,
        error?.code ?? 'error',
        error?.message ?? `request failed (${res.status})`,
      );
    }
    return data as T;
  }

  return {
    overview: () => call<AdminOverview>('GET', '/overview'),
    invite: (email: string) => call<{ user: AdminUser }>('POST', '/users', { email }),
    setSubscription: (userId: number, tier: string, expiresAt: string | null) =>
      call<unknown>('PUT', `/users/${userId}/subscription`, { tier, expiresAt }),
    deleteUser: (userId: number) => call<void>('DELETE', `/users/${userId}`),
    revokeDevice: (deviceId: number) => call<void>('DELETE', `/devices/${deviceId}`),
    removeProject: (projectId: number) => call<void>('DELETE', `/projects/${projectId}`),
    approvePairing: (code: string, email: string) =>
      call<{ device: AdminDevice; user: AdminUser }>('POST', '/pairings/approve', { code, email }),
    denyPairing: (code: string) => call<void>('POST', '/pairings/deny', { code }),
  };
}

export type AdminApi = ReturnType<typeof createAdminApi>;
