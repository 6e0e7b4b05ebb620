/** Where the admin token is kept for the tab's lifetime (never localStorage, never a URL query). */
const storageKey = 'sync-host.adminToken';

/** What the Electron preload exposes on `window.syncHost`. */
interface Bridge {
  adminToken(): Promise<string>;
}

declare global {
  interface Window {
    syncHost?: Bridge;
  }
}

/**
 * The admin token: from the Electron preload, else from the URL fragment (`#token=…`, removed
 * from the address bar at once), else from sessionStorage. Undefined when none is known.
 */
export async function resolveToken(): Promise<string | undefined> {
  if (window.syncHost) {
    const token = await window.syncHost.adminToken();
    if (token) return token;
  }
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fromUrl = fragment.get('token');
  if (fromUrl) {
    sessionStorage.setItem(storageKey, fromUrl);
    history.replaceState(null, '', `${location.pathname}${location.search}`);
    return fromUrl;
  }
  return sessionStorage.getItem(storageKey) ?? undefined;
}

export function storeToken(token: string): void {
  sessionStorage.setItem(storageKey, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(storageKey);
}
