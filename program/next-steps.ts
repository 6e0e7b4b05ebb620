import { shortFingerprint } from '../protocol/fingerprint.ts';
import type { HostUrls } from '../server/host.ts';

/** The certificate's fingerprint as the host prints it: the short form, then the whole. */
export function fingerprintLine(fingerprint: string): string {
  return `certificate: ${shortFingerprint(fingerprint)} (sha256 ${fingerprint})`;
}

/**
 * What a person does after the host is up, printed below its URLs: sign in each machine that
 * should sync, approved in the admin UI or from a machine already signed in. None without an
 * auth service (`sync-host relay`).
 */
export function nextStepLines(urls: HostUrls): string[] {
  if (urls.auth === undefined) return [];
  return [
    `Next, on each machine that should sync: sync-host login --auth ${urls.auth}`,
    '  and approve the code it shows in the admin UI, or with sync-host pair approve <code> on a machine already signed in',
  ];
}
