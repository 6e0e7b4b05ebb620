/**
 * Node only (mDNS needs UDP sockets): finds sync hosts on the LAN. Not exported from
 * `client/index.ts`, so that browser bundles never pull it in; import `client/discovery.ts`.
 */
import { Bonjour } from 'bonjour-service';
import { type DiscoveredHost, serviceType, toDiscoveredHost } from '../protocol/mdns-record.ts';

export type { DiscoveredHost };

/** stop() resolves after this even when the mDNS socket does not report its close. */
const stopLimitMs = 500;

export interface Browsing {
  /** Hosts currently seen, keyed by instance name. */
  readonly hosts: ReadonlyMap<string, DiscoveredHost>;
  stop(): Promise<void>;
}

export interface BrowseOptions {
  onUp?: (host: DiscoveredHost) => void;
  /** Called when a host withdraws (goodbye packet) or its record expires. */
  onDown?: (name: string) => void;
  /** Called for an answer whose TXT record is not a valid sync-host record (ignored). */
  onInvalid?: (name: string, problem: string) => void;
}

/** Browses for `_sync-host._tcp` until stopped. */
export function browse(options: BrowseOptions = {}): Browsing {
  const hosts = new Map<string, DiscoveredHost>();
  const bonjour = new Bonjour();
  const browser = bonjour.find({ type: serviceType });
  browser.on('up', (service) => {
    const host = toDiscoveredHost(service);
    if (typeof host === 'string') {
      options.onInvalid?.(service.name, host);
      return;
    }
    hosts.set(host.name, host);
    options.onUp?.(host);
  });
  browser.on('down', (service) => {
    hosts.delete(service.name);
    options.onDown?.(service.name);
  });
  let stopped: Promise<void> | undefined;
  return {
    hosts,
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        browser.stop();
        const done = setTimeout(resolve, stopLimitMs);
        bonjour.destroy(() => {
          clearTimeout(done);
          resolve();
        });
      });
      return stopped;
    },
  };
}

/**
 * Listens for `_sync-host._tcp` announcements for `durationMs` (default 3 s) and resolves with
 * every valid host seen, in order of discovery: `{name, authUrl, relayUrl, version, addresses}`.
 */
export async function discoverHosts(
  durationMs = 3_000,
  options: BrowseOptions = {},
): Promise<DiscoveredHost[]> {
  const browsing = browse(options);
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  const found = [...browsing.hosts.values()];
  await browsing.stop();
  return found;
}
