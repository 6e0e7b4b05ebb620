/**
 * Whether the tray app's window accepts a certificate no CA vouches for. Electron asks through
 * `app.on('certificate-error')` for every page and request with such a certificate; the window
 * only ever shows the host's own admin UI, so the answer is yes for that host's address with
 * that host's certificate (its fingerprint pinned), and no for anything else. No Electron
 * import: tested without Electron's binary.
 */
import { sameFingerprint } from '../protocol/fingerprint.ts';
import { certificateFingerprint } from '../server/tls/certificate.ts';

export interface CertificateQuestion {
  /** The URL Electron was loading when the certificate failed its checks. */
  url: string;
  /** The certificate it was shown, PEM (Electron's `Certificate.data`). */
  certificatePem: string;
}

export interface OwnHost {
  /** The address the tray reaches its own auth port at (`https://127.0.0.1:8445`). */
  base: string;
  /** The host's certificate fingerprint; undefined when the host speaks plain HTTP. */
  fingerprint: string | undefined;
}

/** True only for the host's own address showing the host's own certificate. */
export function acceptsCertificate(question: CertificateQuestion, host: OwnHost): boolean {
  if (host.fingerprint === undefined || !host.base.startsWith('https://')) return false;
  // The base and a slash: https://127.0.0.1:8445 must not match https://127.0.0.1:84450.
  if (!question.url.startsWith(`${host.base}/`)) return false;
  let shown: string;
  try {
    shown = certificateFingerprint(question.certificatePem);
  } catch {
    return false; // not a certificate node can read: not the host's
  }
  return sameFingerprint(shown, host.fingerprint);
}
