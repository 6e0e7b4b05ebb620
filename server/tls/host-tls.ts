import { readFileSync } from 'node:fs';
import { hostname, networkInterfaces } from 'node:os';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { AuthConfig } from '../config/auth-config.ts';
import { ConfigError } from '../config/conf-file.ts';
import type { RelayConfig } from '../config/relay-config.ts';
import type { Logger } from '../log.ts';
import { type CertificatePair, ensureSelfSigned, readCertificatePair } from './certificate.ts';
import type { TlsContextSource } from './secure-port.ts';

/** A port's certificate: what it serves now and what clients pin it by. */
export interface HostTls extends TlsContextSource {
  /** SHA-256 of the certificate's public key, base64url. */
  fingerprint: string;
  /** Stops the renewal timer. */
  stop(): void;
}

/** How often a running host checks whether its self-signed certificate is due for renewal. */
const renewalCheckMs = 12 * 3_600_000;

/** The names a self-signed certificate covers: host name, `<host>.local`, localhost, every address. */
export function hostNames(bind: string): string[] {
  const short = hostname().split('.')[0] || 'localhost';
  const names = [hostname(), `${short}.local`, 'localhost', '127.0.0.1', '::1'];
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (!a.internal) names.push(a.address.replace(/%.*$/, ''));
  }
  if (bind !== '0.0.0.0' && bind !== '::' && bind !== '') names.push(bind);
  return [...new Set(names)];
}

function sourceOf(pair: CertificatePair): { context: SecureContext } {
  return { context: createSecureContext({ cert: pair.cert, key: pair.key }) };
}

/** Reads TLS=files' certificate and key, as a ConfigError naming the key on failure. */
function readFiles(
  file: 'auth.conf' | 'relay.conf',
  cert: string,
  key: string,
  names: { cert: string; key: string },
): CertificatePair {
  const read = (path: string, keyName: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch (err: unknown) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new ConfigError(file, undefined, keyName, `cannot read ${path} (${code})`);
    }
  };
  const certPem = read(cert, names.cert);
  const keyPem = read(key, names.key);
  try {
    return readCertificatePair(certPem, keyPem);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    throw new ConfigError(file, undefined, names.cert, `${cert} and ${key}: ${why}`);
  }
}

/**
 * The auth service's TLS (and, co-hosted, the relay's): undefined when TLS is off. TLS unset is
 * `self-signed` for the all-in-one host and `off` for the auth service on its own. A self-signed
 * certificate is checked for renewal at start and twice a day, on the same key.
 */
export async function prepareHostTls(options: {
  mode: 'headless' | 'auth';
  config: AuthConfig;
  logger: Logger;
  now?: () => number;
}): Promise<HostTls | undefined> {
  const { config, logger } = options;
  const now = options.now ?? Date.now;
  const mode = config.tls ?? (options.mode === 'headless' ? 'self-signed' : 'off');
  if (mode === 'off') return undefined;
  if (config.authBaseUrl?.startsWith('http://')) {
    logger.warn(
      { tls: mode },
      'AUTH_BASE_URL is http:// but the auth port speaks TLS: links to it will fail; write https:// or set TLS=off behind a proxy',
    );
  }
  if (mode === 'files') {
    const pair = readFiles('auth.conf', config.tlsCert ?? '', config.tlsKey ?? '', {
      cert: 'TLS_CERT',
      key: 'TLS_KEY',
    });
    const { context } = sourceOf(pair);
    return { fingerprint: pair.fingerprint, context: () => context, stop: () => {} };
  }
  const names = hostNames(config.bind);
  const first = await ensureSelfSigned(config.dataDir, names, now());
  if (first.renewed) logger.info({ notAfter: new Date(first.notAfterMs) }, 'certificate made');
  let current = sourceOf(first);
  const timer = setInterval(() => {
    ensureSelfSigned(config.dataDir, names, now()).then(
      (pair) => {
        if (!pair.renewed) return;
        current = sourceOf(pair);
        logger.info({ notAfter: new Date(pair.notAfterMs) }, 'certificate renewed, same key');
      },
      (err: unknown) =>
        logger.error(
          { err: err instanceof Error ? err.message : String(err) },
          'certificate renewal failed',
        ),
    );
  }, renewalCheckMs).unref();
  return {
    fingerprint: first.fingerprint,
    context: () => current.context,
    stop: () => clearInterval(timer),
  };
}

/**
 * The relay port's TLS: relay.conf's `tls.cert`/`tls.key` when set, else the host's
 * (co-hosted), else none (plain ws://).
 */
export function relayTls(config: RelayConfig, host: HostTls | undefined): HostTls | undefined {
  if (config.tlsCert === undefined && config.tlsKey === undefined) return host;
  if (config.tlsCert === undefined || config.tlsKey === undefined) {
    const missing = config.tlsCert === undefined ? 'tls.cert' : 'tls.key';
    throw new ConfigError('relay.conf', undefined, missing, 'tls.cert and tls.key go together');
  }
  const pair = readFiles('relay.conf', config.tlsCert, config.tlsKey, {
    cert: 'tls.cert',
    key: 'tls.key',
  });
  const { context } = sourceOf(pair);
  return { fingerprint: pair.fingerprint, context: () => context, stop: () => {} };
}
