/**
 * Node only (mDNS needs UDP sockets): finds sync hosts on the LAN. Not exported from
 * `client/index.ts`, so that browser bundles never pull it in; import `client/discovery.ts`.
 */
import {
  type BrowseOptions,
  discoverHosts as browseForHosts,
  type DiscoveredHost,
} from '../server/discovery/browse.ts';

export type { DiscoveredHost };

/**
 * Listens for `_sync-host._tcp` announcements for `durationMs` (default 3 s) and resolves with
 * every valid host seen: `{name, authUrl, relayUrl, version, addresses}`.
 */
export function discoverHosts(
  durationMs = 3_000,
  options: Pick<BrowseOptions, 'onInvalid'> = {},
): Promise<DiscoveredHost[]> {
  return browseForHosts(durationMs, options);
}
