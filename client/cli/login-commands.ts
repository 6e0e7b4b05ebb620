import { type AuthClient, createAuthClient } from '../auth-client.ts';
import type { Device, SignedIn } from '../auth-types.ts';
import { AuthServiceError, SyncError } from '../errors.ts';
import { pinnedFetch } from '../pinning.ts';
import {
  authUrlOf,
  type Context,
  expectArgs,
  signedIn,
  UsageError,
  unknownSubcommand,
} from './context.ts';
import { ask, readLine } from './io.ts';
import { defaultDeviceName, loginByPairing, signInWithToken } from './login.ts';
import { printable } from './printable.ts';
import { trustHost } from './trust.ts';

const authUrlRequired =
  '--auth URL is required: the auth URL the host prints at start (sync-host discover finds hosts on the LAN)';

/** `login [<email>]`: signs this device in (token, e-mailed link or pairing) and stores it. */
export async function login(ctx: Context): Promise<number> {
  if (ctx.args.length > 1) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  if (ctx.flags.auth === undefined) throw new UsageError(authUrlRequired);
  const email = ctx.args[0];
  const authUrl = authUrlOf(ctx.flags.auth);
  const fingerprint = await trustHost(ctx, authUrl);
  const auth = createAuthClient({
    authUrl,
    fetch: fingerprint === undefined ? undefined : pinnedFetch(fingerprint),
  });
  const platform = ctx.flags.platform ?? process.platform;
  // Asked only when a new device is made: a device token names a device that has its name.
  const describe = async () => ({ deviceName: await deviceNameOf(ctx, platform), platform });
  let signed: SignedIn;
  if (ctx.flags.token !== undefined) {
    const variant = ctx.flags.jwt ? 'jwt' : 'device';
    signed = await signInWithToken(auth, ctx.flags.token, describe, variant);
  } else if (email === undefined || (await auth.hostInfo()).smtp === false) {
    if (email !== undefined) {
      ctx.io.stderr.write(
        `This host sends no e-mail (no SMTP): pairing instead. The host prints a sign-in link for ${email}; open it, paste it here, or approve the code below.\n`,
      );
    }
    const account = ctx.flags.account;
    signed = await loginByPairing(ctx.io, auth, {
      ...(await describe()),
      email,
      fingerprint,
      account,
    });
  } else {
    const variant = ctx.flags.jwt ? 'jwt' : 'device';
    await auth.requestLogin(email, variant);
    ctx.io.stderr.write(`A login link was sent to ${email}.\n`);
    const token = await readLine(ctx.io, 'Paste the token or the whole link from the e-mail: ');
    if (token === undefined) {
      throw new SyncError('no_token', 'no token or link was given on standard input');
    }
    signed = await auth.signIn(token, await describe(), variant);
  }
  if (email !== undefined && signed.user.email !== email.trim().toLowerCase()) {
    ctx.io.stderr.write(`note: the sign-in was for ${signed.user.email}\n`);
  }
  ctx.store.save(authUrl, {
    email: signed.user.email,
    userId: signed.user.id,
    deviceId: signed.device.id,
    deviceName: signed.device.deviceName,
    deviceToken: signed.deviceToken,
    savedAt: new Date().toISOString(),
    ...(fingerprint === undefined ? {} : { fingerprint }),
  });
  ctx.io.stdout.write(
    `Signed in as ${signed.user.email} on ${authUrl}: device ${signed.device.id} "${signed.device.deviceName}" (credentials in ${ctx.store.path})\n`,
  );
  await noteSameName(ctx, auth.withDeviceToken(signed.deviceToken), signed.device);
  return 0;
}

/**
 * Another device of the account with this one's name (two virtual machines both called `vm`,
 * on the same platform): said once, since device lists then tell them apart by id alone.
 */
async function noteSameName(ctx: Context, auth: AuthClient, device: Device): Promise<void> {
  let devices: Device[];
  try {
    devices = await auth.devices();
  } catch (err: unknown) {
    // The device is signed in and stored: a note is not worth failing the login for.
    if (err instanceof SyncError) return;
    throw err;
  }
  const twins = devices.filter((d) => d.id !== device.id && d.deviceName === device.deviceName);
  if (twins.length === 0) return;
  const ids = `${twins.length === 1 ? 'device' : 'devices'} ${twins.map((d) => d.id).join(', ')}`;
  ctx.io.stderr.write(
    `note: this account has another device named "${printable(device.deviceName)}" (${ids}); sync-host devices tells them apart by id (name a machine with login --device-name)\n`,
  );
}

/**
 * `--device-name`, else the host name with the platform (`vm (linux)`), which tells two
 * machines apart in device lists; on a terminal that default is offered and can be changed.
 */
async function deviceNameOf(ctx: Context, platform: string): Promise<string> {
  const given = ctx.flags['device-name'];
  if (given !== undefined) return given;
  const fallback = defaultDeviceName(platform);
  if (ctx.io.stdin.isTTY !== true || ctx.io.stderr.isTTY !== true) return fallback;
  return ask(ctx.io, 'Name of this device', fallback);
}

/** Removes this device at the host (its token stops working) and forgets the credential. */
export async function logout(ctx: Context): Promise<number> {
  expectArgs(ctx, 0, '');
  const { auth, authUrl, credential } = await signedIn(ctx);
  try {
    await auth.deleteDevice(credential.deviceId);
  } catch (err: unknown) {
    // Already removed elsewhere: forgetting it here is all that is left to do.
    if (!(err instanceof AuthServiceError) || (err.status !== 401 && err.status !== 404)) throw err;
  }
  ctx.store.remove(authUrl);
  ctx.io.stderr.write(`Signed out of ${authUrl}: device ${credential.deviceId} removed.\n`);
  return 0;
}

/** `pair approve <code>` / `pair deny <code>` from a signed-in device. */
export async function pairCommand(ctx: Context): Promise<number> {
  const action = ctx.args.shift();
  if (action === undefined)
    throw new UsageError('expected: pair approve <code> or pair deny <code>');
  if (action !== 'approve' && action !== 'deny')
    throw unknownSubcommand('pair', action, ['approve', 'deny']);
  expectArgs(ctx, 1, '<code>');
  const { auth, credential } = await signedIn(ctx);
  const code = ctx.args[0]!;
  if (action === 'deny') {
    await auth.denyPairing(code);
    ctx.io.stderr.write(`Denied: the device showing ${code} was refused.\n`);
    return 0;
  }
  // The approver sees what is waiting and confirms its name: a code read out by someone else
  // must not put a stranger's device into this account, nor this account on a stranger's device.
  const waiting = await auth.describePairing(code);
  ctx.io.stderr.write(
    `Waiting with ${waiting.code}: "${waiting.deviceName}" (${waiting.platform}) from ${waiting.clientAddress}.\n`,
  );
  let deviceName = ctx.flags['device-name'] ?? waiting.deviceName;
  if (ctx.flags['device-name'] === undefined && ctx.io.stdin.isTTY && ctx.io.stderr.isTTY) {
    const answer = await ask(
      ctx.io,
      `Approve it into ${credential.email}? Type its name to confirm`,
      '',
    );
    if (answer !== waiting.deviceName) {
      ctx.io.stderr.write("Not approved: the name typed is not the waiting device's.\n");
      return 1;
    }
    deviceName = answer;
  }
  const device = await auth.approvePairing(code, deviceName);
  ctx.io.stderr.write(
    `Approved: device ${device.id} "${device.deviceName}" (${device.platform}) joins ${credential.email} once it accepts this account on its side.\n`,
  );
  return 0;
}
