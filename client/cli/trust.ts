import { parseFingerprint, sameFingerprint, shortFingerprint } from '../../protocol/fingerprint.ts';
import { SyncError } from '../errors.ts';
import { FingerprintMismatchError, probeCertificate } from '../pinning.ts';
import { unreachable } from '../service-check.ts';
import { type Context, UsageError } from './context.ts';
import { readLine } from './io.ts';

/** How a fingerprint is shown to a person: the short form, then the whole. */
export function fingerprintText(fingerprint: string): string {
  return `${shortFingerprint(fingerprint)} (sha256 ${fingerprint})`;
}

/**
 * Decides, before anything is sent, which certificate `login` trusts at an https:// auth
 * service: the one `--fingerprint` names, else the one pinned at an earlier login, else, on a
 * terminal, the one the person accepts as ssh asks; without a terminal it refuses and shows the
 * fingerprint. A certificate a CA vouches for needs no pin. Returns the fingerprint to pin, or
 * undefined (http://, or CA-signed without `--fingerprint`).
 */
export async function trustHost(ctx: Context, authUrl: string): Promise<string | undefined> {
  const given = ctx.flags.fingerprint;
  const wanted = given === undefined ? undefined : parseFingerprint(given);
  if (given !== undefined && wanted === undefined) {
    throw new UsageError(
      '--fingerprint must be the whole SHA-256 fingerprint the host prints (base64url, or 64 hex digits)',
    );
  }
  if (!authUrl.startsWith('https:')) {
    if (given !== undefined)
      throw new UsageError(`--fingerprint needs an https:// auth URL, not ${authUrl}`);
    return undefined;
  }
  const shown = await probeCertificate(authUrl).catch((err: unknown) => {
    throw unreachable(authUrl, err);
  });
  const seen = shown.fingerprint;
  if (seen === undefined) throw new FingerprintMismatchError(authUrl, wanted ?? '', undefined);
  const expected = wanted ?? ctx.store.get(authUrl)?.fingerprint;
  if (expected !== undefined) {
    if (!sameFingerprint(expected, seen))
      throw new FingerprintMismatchError(authUrl, expected, seen);
    return seen;
  }
  if (shown.authorized) return undefined;
  if (ctx.io.stdin.isTTY !== true || ctx.io.stderr.isTTY !== true) {
    throw new SyncError(
      'fingerprint_required',
      `the host at ${authUrl} shows certificate ${fingerprintText(seen)}: check that the host printed the same, then pass --fingerprint ${seen}`,
    );
  }
  ctx.io.stderr.write(
    [
      `The authenticity of the host at ${authUrl} can't be established.`,
      `Its certificate: ${shortFingerprint(seen)}`,
      `  (sha256 ${seen})`,
      "Compare it with the certificate line the host printed at start, or its admin UI's.",
      '',
    ].join('\n'),
  );
  for (;;) {
    const answer = (
      await readLine(ctx.io, 'Trust this host and continue (yes/no)? ')
    )?.toLowerCase();
    if (answer === 'yes') return seen;
    if (answer === undefined || answer === 'no') {
      throw new SyncError(
        'not_trusted',
        `the host at ${authUrl} was not trusted; nothing was sent to it`,
      );
    }
    ctx.io.stderr.write('Please type "yes" or "no".\n');
  }
}
