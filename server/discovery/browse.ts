import { Bonjour, type Service } from 'bonjour-service';
import { hostTxtSchema, serviceType } from './txt.ts';

/** A host found on the LAN. */
export interface DiscoveredHost {
  name: string;
  authUrl: string;
  relayUrl: string;
  version: string;
  /** Addresses the host answered from. */
  addresses: string[];
}

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

/** Parses a found service; the problem as a string when its TXT record does not validate. */
export function toDiscoveredHost(
  service: Pick<Service, 'name' | 'txt' | 'addresses'>,
): DiscoveredHost | string {
  const parsed = hostTxtSchema.safeParse(service.txt ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `TXT ${issue?.path.join('.') || 'record'} ${issue?.message ?? 'is invalid'}`;
  }
  return {
    name: service.name,
    authUrl: parsed.data.auth,
    relayUrl: parsed.data.relay,
    version: parsed.data.version,
    addresses: [...(service.addresses ?? [])],
  };
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
        const done = setTimeout(resolve, 500);
        bonjour.destroy(() => {
          clearTimeout(done);
          resolve();
        });
      });
      return stopped;
    },
  };
}

/** Browses for `durationMs` and resolves with every valid host seen, in order of discovery. */
export async function discoverHosts(
  durationMs: number,
  options: BrowseOptions = {},
): Promise<DiscoveredHost[]> {
  const browsing = browse(options);
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  const found = [...browsing.hosts.values()];
  await browsing.stop();
  return found;
}
