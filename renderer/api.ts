import type { AdminDevice, AdminOverview, AdminUser } from '../server/admin/types.ts';
import { createAdminCall } from './admin-call.ts';

/** The admin API as the UI uses it; the token goes in the Authorization header only. */
export function createAdminApi(token: string) {
  const call = createAdminCall({
    base: () => '',
    token: () => token,
    unreachable: () => 'Cannot reach the sync host. Is it still running?',
    init: { cache: 'no-store' },
  });

  return {
    /** Everything the page shows, the storage from its project number `storageOffset`. */
    overview: (storageOffset: number) =>
      call<AdminOverview>('GET', `/overview?storageOffset=${storageOffset}`),
    /** The names of one folder's latest report. */
    reportNames: (room: string, doc: string) =>
      call<{ names: string[] }>(
        'GET',
        `/storage/names?room=${encodeURIComponent(room)}&doc=${encodeURIComponent(doc)}`,
      ),
    invite: (email: string) => call<{ user: AdminUser }>('POST', '/users', { email }),
    setSubscription: (userId: number, tier: string, expiresAt: string | null) =>
      call<unknown>('PUT', `/users/${userId}/subscription`, { tier, expiresAt }),
    deleteUser: (userId: number) => call<void>('DELETE', `/users/${userId}`),
    revokeDevice: (deviceId: number) => call<void>('DELETE', `/devices/${deviceId}`),
    removeProject: (projectId: number) => call<void>('DELETE', `/projects/${projectId}`),
    removeMember: (projectId: number, userId: number) =>
      call<void>('DELETE', `/projects/${projectId}/members/${userId}`),
    approvePairing: (code: string, email: string) =>
      call<{ device: AdminDevice; user: AdminUser }>('POST', '/pairings/approve', { code, email }),
    denyPairing: (code: string) => call<void>('POST', '/pairings/deny', { code }),
  };
}

export type AdminApi = ReturnType<typeof createAdminApi>;
