import { hostname } from 'node:os';
import { createInterface } from 'node:readline';
import QRCode from 'qrcode';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import type { AuthClient, LoginVariant } from '../auth-client.ts';
import type {
  ApprovedBy,
  DeviceDescription,
  Paired,
  PairingOffer,
  PairingStarted,
  SignedIn,
} from '../auth-types.ts';
import { pair } from '../pairing.ts';
import { ask, type CliIo } from './io.ts';

/** The name a device gets unless told otherwise: its host name and platform, `vm (linux)`. */
export function defaultDeviceName(platform: string = process.platform): string {
  return `${hostname()} (${platform})`;
}

/** How the person who approved is named to the new device's user. */
export function approvedByLine(by: ApprovedBy): string {
  if (by.via === 'device') return `Approved on your device "${by.name ?? '?'}".`;
  if (by.via === 'link') return `Approved through the sign-in link sent to ${by.name ?? 'you'}.`;
  return 'Approved by the host administrator.';
}

/**
 * A signed-in device approved this one into its account: says which account and asks before
 * joining it (someone else may have typed this code). `expected` is the account the person
 * named (`--account`, or the e-mail of `login <email>`): another one is declined without asking,
 * and that one is joined. Without a terminal (a script) and without `expected`, nobody can agree:
 * declined, with the flag that would join it.
 */
export async function acceptOffer(
  io: CliIo,
  offer: PairingOffer,
  expected?: string,
): Promise<boolean> {
  io.stderr.write(
    `The device "${offer.approvedBy.name ?? '?'}" approved this device into the account ${offer.email}.\n`,
  );
  if (expected !== undefined) {
    if (expected.trim().toLowerCase() === offer.email.toLowerCase()) return true;
    io.stderr.write(`That is not the account ${expected.trim()} this login was for.\n`);
    return false;
  }
  if (io.stdin.isTTY !== true || io.stderr.isTTY !== true) {
    io.stderr.write(
      `No terminal to ask whether to join it: to join it from a script, run login again with --account ${offer.email}.\n`,
    );
    return false;
  }
  const answer = await ask(io, `Join the account ${offer.email}? (y/n)`, 'n');
  return /^y(es)?$/i.test(answer);
}

/**
 * What the QR code of the approve URL holds: the URL, with the fingerprint this device pinned
 * beside the pairing code in its fragment (`#pair=<code>&fp=<fingerprint>`, never sent to the
 * host) when the URL is on the https:// origin the fingerprint was checked on. Without a pin
 * (http://, or a certificate a CA vouches for) or for another origin (a proxy's address, with
 * another certificate) the URL alone: a fingerprint there would name the wrong certificate.
 */
export function approveQrText(
  approveUrl: string,
  authUrl: string,
  fingerprint: string | undefined,
): string {
  if (fingerprint === undefined) return approveUrl;
  let url: URL;
  try {
    url = new URL(approveUrl);
    if (url.protocol !== 'https:' || url.origin !== new URL(authUrl).origin) return approveUrl;
  } catch {
    return approveUrl;
  }
  const fragment = new URLSearchParams(url.hash.slice(1));
  fragment.set('fp', fingerprint);
  url.hash = fragment.toString();
  return url.href;
}

/** The code, where to approve it, and a QR code of the approve URL for a phone. */
async function showCode(
  io: CliIo,
  started: PairingStarted,
  email: string | undefined,
  pin: { authUrl: string; fingerprint: string | undefined },
) {
  const { fingerprint } = pin;
  const qrText = approveQrText(started.approveUrl, pin.authUrl, fingerprint);
  // Colours for a terminal; into a file or a pipe, plain block characters and no escapes.
  const qr =
    io.stderr.isTTY === true
      ? await QRCode.toString(qrText, { type: 'terminal', small: true })
      : await QRCode.toString(qrText, { type: 'utf8' });
  const until = new Date(started.expiresAt).toLocaleTimeString();
  io.stderr.write(
    [
      '',
      `  Pairing code:  ${started.code}`,
      ...(fingerprint === undefined
        ? []
        : [`  Certificate:   ${shortFingerprint(fingerprint)} (the host shows the same)`]),
      '',
      'Approve this device, then it signs in by itself:',
      `  - in the host's admin UI: ${started.approveUrl} (or scan the QR code below)`,
      `  - or on a device that is signed in: sync-host pair approve ${started.code}`,
      ...(email === undefined
        ? []
        : [
            `  - or open the sign-in link for ${email} (e-mailed, or printed by the host) and press the button`,
          ]),
      '',
      qr,
      `Waiting for approval (the code expires at ${until}; Ctrl-C to stop)...`,
      '',
    ].join('\n'),
  );
}

/**
 * A cancellable read of the first non-empty line of standard input: in pairing with an e-mail
 * the link may be pasted here instead of opened in a browser.
 */
function nextLine(io: CliIo): { line: Promise<string | undefined>; cancel(): void } {
  const lines = createInterface({ input: io.stdin, terminal: false });
  const line = new Promise<string | undefined>((resolve) => {
    lines.on('line', (text) => {
      if (text.trim() === '') return;
      resolve(text.trim());
      lines.close();
    });
    lines.on('close', () => resolve(undefined));
  });
  return { line, cancel: () => lines.close() };
}

/**
 * Signs this device in by pairing (the host approves a code instead of e-mailing a link):
 * shows the code, the approve URL and its QR code, waits, and says who approved.
 */
export async function loginByPairing(
  io: CliIo,
  auth: AuthClient,
  options: {
    deviceName?: string;
    platform?: string;
    email?: string;
    fingerprint?: string;
    /** The account the person means to join (`--account`); else the e-mail, if any. */
    account?: string;
  },
): Promise<Paired> {
  const platform = options.platform ?? process.platform;
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  const pasted = options.email === undefined ? undefined : nextLine(io);
  pasted?.line
    .then(async (text) => {
      if (text === undefined || controller.signal.aborted) return;
      await auth.useLink(text);
      io.stderr.write('The link was used; collecting the approval...\n');
    })
    .catch((err: unknown) => {
      io.stderr.write(
        `The pasted link was not accepted: ${err instanceof Error ? err.message : String(err)}\n`,
      );
    });
  try {
    const paired = await pair(
      {
        authUrl: auth.authUrl,
        device: {
          deviceName: options.deviceName ?? defaultDeviceName(platform),
          platform,
        },
        email: options.email,
        signal: controller.signal,
        onOffer: (offer) => {
          // the answer is read from standard input: a pasted link is not waited for any more
          pasted?.cancel();
          return acceptOffer(io, offer, options.account ?? options.email);
        },
        onCode: (started) => {
          const pin = { authUrl: auth.authUrl, fingerprint: options.fingerprint };
          showCode(io, started, options.email, pin).catch((err: unknown) => {
            io.stderr.write(`(no QR code: ${err instanceof Error ? err.message : String(err)})\n`);
          });
        },
      },
      auth,
    );
    io.stderr.write(`${approvedByLine(paired.approvedBy)}\n`);
    return paired;
  } finally {
    process.off('SIGINT', stop);
    pasted?.cancel();
  }
}

/** A login JWT (what a link's page shows), with or without the command around it. */
const jwtShape = /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/;
/** A device token `<userId>:<deviceId>:<timestamp>.<hash>`. */
const deviceTokenShape = /^\d+:\d+:\d+\.[0-9a-f]+$/;

/**
 * `login --token`: whatever a link's page shows works: the link or its token (verified with
 * this device), the sign-in code (a JWT, turned into a device by POST /auth/devices), the
 * command line the page shows, or a device token (checked, then stored).
 */
export async function signInWithToken(
  auth: AuthClient,
  given: string,
  describe: () => Promise<DeviceDescription>,
  variant: LoginVariant,
): Promise<SignedIn> {
  const token = given.trim().replace(/^.*--token\s+/, '');
  if (jwtShape.test(token)) {
    const registered = await auth.registerDevice(token, await describe());
    const { user } = await auth.withDeviceToken(registered.deviceToken).device();
    return { ...registered, user };
  }
  if (deviceTokenShape.test(token)) {
    const me = await auth.withDeviceToken(token).device();
    return { deviceToken: token, device: me.device, user: me.user };
  }
  return auth.signIn(token, await describe(), variant);
}
