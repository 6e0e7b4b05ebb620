import { hostname } from 'node:os';
import { Bonjour } from 'bonjour-service';
import { type HostTxt, serviceType } from '../../protocol/mdns-record.ts';
import type { Logger } from '../log.ts';

/** stop() resolves after this even when the goodbye packets or the socket close hang. */
const stopLimitMs = 1_000;

export interface AdvertiseOptions {
  /** The auth port (the service's SRV port). */
  port: number;
  txt: HostTxt;
  logger: Logger;
  /** Instance name shown by browsers. Default `sync-host on <hostname>`. */
  name?: string;
}

export interface Advertisement {
  /** Sends goodbye packets (TTL 0) and closes the mDNS socket. */
  stop(): Promise<void>;
}

/**
 * Advertises `_sync-host._tcp` on the LAN with TXT auth, relay and version. Errors of the mDNS
 * socket (no multicast route, port 5353 taken) are logged, never fatal: discovery is a convenience.
 */
export function advertise(options: AdvertiseOptions): Advertisement {
  const { logger } = options;
  const bonjour = new Bonjour({}, (err: unknown) => {
    logger.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'mDNS advertising failed',
    );
  });
  const shortName = hostname().split('.')[0] || 'host';
  const name = options.name ?? `sync-host on ${shortName}`;
  const service = bonjour.publish({
    name,
    type: serviceType,
    // The SRV target and the A/AAAA records: `<hostname>.local.`, the name every mDNS resolver
    // (Avahi, Bonjour) asks for; a bare host name resolves nowhere.
    host: `${shortName}.local`,
    port: options.port,
    txt: { ...options.txt },
  });
  service.on('error', (err: unknown) => {
    logger.warn(
      { err: err instanceof Error ? err.message : String(err) },
      'mDNS advertising failed',
    );
  });
  logger.info(
    { name, type: `_${serviceType}._tcp`, port: options.port },
    'advertising on the LAN (mDNS)',
  );
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        const done = setTimeout(resolve, stopLimitMs);
        bonjour.unpublishAll(() => {
          bonjour.destroy(() => {
            clearTimeout(done);
            resolve();
          });
        });
      });
      return stopped;
    },
  };
}
