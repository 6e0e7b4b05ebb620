import {
  createHash,
  createPrivateKey,
  createPublicKey,
  randomBytes,
  webcrypto,
  X509Certificate,
} from 'node:crypto';
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { fingerprintOf } from '../../protocol/fingerprint.ts';

/** The X.509 library, loaded when a certificate is made (it needs the Reflect metadata polyfill first). */
async function loadX509() {
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  x509.cryptoProvider.set(webcrypto as unknown as Crypto);
  return x509;
}

/** A certificate with its key, in PEM, and what clients pin it by. */
export interface CertificatePair {
  cert: string;
  key: string;
  /** SHA-256 of the public key (base64url): the same across renewals with the same key. */
  fingerprint: string;
  /** When the certificate expires (ms since the epoch). */
  notAfterMs: number;
}

const dayMs = 86_400_000;
/** How long a self-signed certificate is valid. */
export const validityDays = 365;
/** A self-signed certificate is made again (same key) when it has fewer days left than this. */
export const renewBeforeDays = 30;

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** The fingerprint of a PEM certificate: SHA-256 of its SubjectPublicKeyInfo, base64url. */
export function certificateFingerprint(certPem: string): string {
  const spki = new X509Certificate(certPem).publicKey.export({
    type: 'spki',
    format: 'der',
  });
  return fingerprintOf(createHash('sha256').update(spki).digest());
}

/** Reads a PEM certificate and key (TLS=files, or the self-signed pair) and what they pin to. */
export function readCertificatePair(cert: string, key: string): CertificatePair {
  const parsed = new X509Certificate(cert);
  // The key must belong to the certificate, or every handshake would fail later.
  if (!parsed.checkPrivateKey(createPrivateKey(key))) {
    throw new Error('the key does not belong to the certificate');
  }
  return {
    cert,
    key,
    fingerprint: certificateFingerprint(cert),
    notAfterMs: Date.parse(parsed.validTo),
  };
}

/** Makes a self-signed certificate for `names` (DNS names and IP addresses) on `keyPem`. */
export async function makeSelfSigned(
  keyPem: string,
  names: readonly string[],
  nowMs: number,
): Promise<CertificatePair> {
  const x509 = await loadX509();
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    createPrivateKey(keyPem).export({ type: 'pkcs8', format: 'der' }),
    algorithm,
    true,
    ['sign'],
  );
  const publicKey = await webcrypto.subtle.importKey(
    'spki',
    createPublicKey(keyPem).export({ type: 'spki', format: 'der' }),
    algorithm,
    true,
    ['verify'],
  );
  const notBefore = new Date(nowMs - dayMs);
  const notAfter = new Date(nowMs + validityDays * dayMs);
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial.toString('hex'),
    name: `CN=${names[0] ?? 'sync-host'}, O=sync-host`,
    notBefore,
    notAfter,
    signingAlgorithm: algorithm,
    keys: { privateKey, publicKey },
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(
        names.map((value) => ({ type: isIP(value) ? ('ip' as const) : ('dns' as const), value })),
      ),
    ],
  });
  const cert = certificate.toString('pem');
  return readCertificatePair(cert, keyPem);
}

/** A new ECDSA P-256 private key in PKCS#8 PEM. */
async function newKey(): Promise<string> {
  const pair = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', pair.privateKey));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();
}

/** Writes a file whole (a temporary file renamed over it) with `mode`. */
function writeWhole(path: string, text: string, mode: number): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode });
  chmodSync(temporary, mode);
  renameSync(temporary, path);
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The pair, or undefined when the certificate is damaged or not of this key (made again). */
function readablePair(cert: string, key: string): CertificatePair | undefined {
  try {
    return readCertificatePair(cert, key);
  } catch {
    return undefined;
  }
}

/** A name as a certificate lists it: lower case, an IPv6 address with all eight groups (`fd00:0:0:0:0:0:0:2`). */
function canonicalName(name: string): string {
  const lower = name.toLowerCase();
  if (isIP(lower) !== 6 || lower.includes('.')) return lower;
  const [head = '', tail] = lower.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...(tail === undefined ? [] : zeros), ...right]
    .map((group) => group.replace(/^0+(?=.)/, ''))
    .join(':');
}

/** Whether a certificate covers every one of `names`. */
function sameNames(pair: CertificatePair, names: readonly string[]): boolean {
  const parsed = new X509Certificate(pair.cert);
  const covered = (parsed.subjectAltName ?? '')
    .split(', ')
    .map((entry) => canonicalName(entry.replace(/^(DNS|IP Address):/, '')));
  return names.every((name) => covered.includes(canonicalName(name)));
}

/** Where the self-signed certificate and its key live in the data folder. */
export function selfSignedPaths(dataDir: string): { cert: string; key: string } {
  return { cert: join(dataDir, 'tls-cert.pem'), key: join(dataDir, 'tls-key.pem') };
}

/**
 * The host's self-signed certificate in the data folder: made on first start with a new key
 * (`tls-key.pem`, mode 0600), and made again on the same key when it expires within
 * `renewBeforeDays` or no longer covers `names` (a new LAN address), so its fingerprint stays.
 * `renewed` tells whether a certificate was (re)made.
 */
export async function ensureSelfSigned(
  dataDir: string,
  names: readonly string[],
  nowMs: number,
): Promise<CertificatePair & { renewed: boolean }> {
  const paths = selfSignedPaths(dataDir);
  let key = readIfPresent(paths.key);
  if (key === undefined) {
    key = await newKey();
    writeWhole(paths.key, key, 0o600);
  }
  const cert = readIfPresent(paths.cert);
  const current = cert === undefined ? undefined : readablePair(cert, key);
  if (
    current !== undefined &&
    current.notAfterMs - nowMs > renewBeforeDays * dayMs &&
    sameNames(current, names)
  ) {
    return { ...current, renewed: false };
  }
  const pair = await makeSelfSigned(key, names, nowMs);
  writeWhole(paths.cert, pair.cert, 0o600);
  return { ...pair, renewed: true };
}
