/**
 * One call to the admin API, shared by the admin UI (renderer/api.ts) and the tray
 * (electron/admin-client.ts): plain `fetch`, no DOM and no Electron, so both sides can import it.
 */

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

export interface AdminCallOptions {
  /** Origin of the host's auth port, without trailing slash; '' for the page's own origin. */
  base: () => string;
  /** The admin token, sent in the Authorization header only. */
  token: () => string;
  /** What a call says when the host cannot be reached (`fetch` itself failed with `err`). */
  unreachable: (err: unknown) => string;
  /** Further fetch options for every call (the UI asks for `cache: 'no-store'`). */
  init?: RequestInit;
  /** The fetch to use (the tray's is pinned to the host's certificate); default the global one. */
  fetch?: () => typeof fetch | undefined;
}

export type AdminCall = <T>(method: string, path: string, body?: unknown) => Promise<T>;

/**
 * `call(method, path, body)` against `<base>/admin/api<path>`: JSON in and out, undefined for a
 * 204, an AdminApiError with the API's `{ error: { code, message } }` for any other failure.
 */
export function createAdminCall(options: AdminCallOptions): AdminCall {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    let res: Response;
    try {
      const doFetch = options.fetch?.() ?? fetch;
      res = await doFetch(`${options.base()}/admin/api${path}`, {
        ...options.init,
        method,
        headers: {
          Authorization: `Bearer ${options.token()}`,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err: unknown) {
      throw new AdminApiError(0, 'unreachable', options.unreachable(err));
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
  };
}
