import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { type AuthClient, createAuthClient } from '../auth-client.ts';
import type { Project, SignedIn } from '../auth-types.ts';
import { AuthServiceError, SettingsError, SyncError } from '../errors.ts';
import { createRelayConnection, type RelayConnection } from '../relay-connection.ts';
import { parseSettings } from '../settings.ts';
import { CredentialStore, configDir } from './credentials.ts';
import { type CliIo, processIo, readLine, readSecret } from './io.ts';
import { loginByPairing, signInWithToken } from './login.ts';
import { runFolderSync, statePath } from './sync-command.ts';

export const clientUsage = `Client commands:
  sync-host login --auth URL [--device-name N] [--platform P]
      pair this device: shows a code (and a QR code of where to approve it) and waits until it
      is approved in the admin UI, on a signed-in device (pair approve) or by its e-mail link
  sync-host login <email> --auth URL [--token T] [--jwt]
      with SMTP on the host: request a login link, then paste the token or the whole link;
      without SMTP: pair as above, joining as <email>
      --token accepts a link, its token, the sign-in code (JWT) a link's page shows, or a device
      token; --jwt uses the JWT flow (POST /auth/magic-link, verify, POST /auth/devices)
  sync-host logout                      remove this device at the host and forget its token
  sync-host pair approve <code>         let a new device showing <code> join your account
  sync-host pair deny <code>            refuse it
  sync-host devices                     list this user's devices (JSON)
  sync-host devices remove <id>         remove a device (its token stops working at once)
  sync-host projects                    list synced projects (JSON)
  sync-host project add <key> <name>    register a workspace (idempotent); prints the project
  sync-host project remove <key>        stop syncing a workspace
  sync-host subscription                tier, effective tier, expiry and project limit (JSON)
  sync-host send <projectKey> <to> <json>
      join the project's room, send {"to","payload"} (to: host, broadcast or a device id), exit
  sync-host listen <projectKey>         print each message for this device as one JSON line
  sync-host sync <projectKey> <dir> [--encrypt]
      keep the text files of <dir> in step with the project's other devices (Yjs documents;
      binary files and files over 1 MiB are skipped); --encrypt reads a passphrase from stdin
      and encrypts end to end (every device must use the same)

Options: --auth URL (needed when several auth services are stored), --relay URL (default: the
auth service's /.well-known/sync-host), --timeout SECONDS (send: default 10).
Credentials: $SYNC_HOST_CONFIG_DIR/credentials.json (default ~/.config/sync-host), mode 0600.
`;

/** A mistake on the command line: exit 2. */
class UsageError extends Error {}

const exitFailure = 1;
const exitUsage = 2;

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      auth: { type: 'string' },
      relay: { type: 'string' },
      'device-name': { type: 'string' },
      platform: { type: 'string' },
      token: { type: 'string' },
      jwt: { type: 'boolean' },
      timeout: { type: 'string' },
      encrypt: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

type Flags = ReturnType<typeof parse>['values'];

interface Context {
  io: CliIo;
  flags: Flags;
  args: string[];
  store: CredentialStore;
}

/** Runs a client subcommand; resolves with the exit code. Errors are one line on stderr. */
export async function runClientCommand(
  argv: string[],
  io: CliIo = processIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const [command = '', ...rest] = argv;
  let context: Context;
  try {
    const { values, positionals } = parse(rest);
    if (values.help) {
      io.stdout.write(clientUsage);
      return 0;
    }
    context = {
      io,
      flags: values,
      args: positionals,
      store: new CredentialStore(configDir(env)),
    };
  } catch (err: unknown) {
    io.stderr.write(`sync-host ${command}: ${errorLine(err)} (see sync-host ${command} --help)\n`);
    return exitUsage;
  }
  try {
    return await dispatch(command, context);
  } catch (err: unknown) {
    if (err instanceof UsageError) {
      io.stderr.write(`sync-host ${command}: ${err.message} (see sync-host ${command} --help)\n`);
      return exitUsage;
    }
    if (!(err instanceof SyncError)) throw err;
    io.stderr.write(`sync-host ${command}: ${errorLine(err)}\n`);
    return exitFailure;
  }
}

function errorLine(err: unknown): string {
  if (err instanceof AuthServiceError) {
    const hint = err.code === 'unauthorized' ? '; sign in again with sync-host login' : '';
    return `${err.message} (${err.code}, HTTP ${err.status})${hint}`;
  }
  if (err instanceof SettingsError) return err.message.replace(/^sync(Auth|Relay)Url /, '');
  if (err instanceof SyncError) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

async function dispatch(command: string, ctx: Context): Promise<number> {
  switch (command) {
    case 'login':
      return login(ctx);
    case 'logout':
      return logout(ctx);
    case 'pair':
      return pairCommand(ctx);
    case 'devices': {
      if (ctx.args[0] === 'remove') {
        ctx.args.shift();
        expectArgs(ctx, 1, '<id>');
        const id = Number(ctx.args[0]);
        if (!Number.isSafeInteger(id) || id <= 0) throw new UsageError('<id> must be a device id');
        await (await signedIn(ctx)).auth.deleteDevice(id);
        ctx.io.stderr.write(`Device ${id} removed.\n`);
        return 0;
      }
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.devices());
    }
    case 'projects':
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.projects());
    case 'subscription':
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.subscription());
    case 'project': {
      if (ctx.args[0] === 'remove') {
        ctx.args.shift();
        expectArgs(ctx, 1, '<key>');
        const { auth } = await signedIn(ctx);
        await auth.deleteProject((await findProject(auth, ctx.args[0]!)).id);
        ctx.io.stderr.write(`Project "${ctx.args[0]}" removed.\n`);
        return 0;
      }
      if (ctx.args[0] !== 'add')
        throw new UsageError('expected: project add <key> <name> or project remove <key>');
      ctx.args.shift();
      expectArgs(ctx, 2, '<key> <name>');
      const { auth } = await signedIn(ctx);
      const { project } = await auth.registerProject(ctx.args[0]!, ctx.args[1]!);
      return printJson(ctx, project);
    }
    case 'send':
      return send(ctx);
    case 'listen':
      return listen(ctx);
    case 'sync':
      return syncFolder(ctx);
    default:
      throw new UsageError(`unknown client command "${command}"`);
  }
}

function expectArgs(ctx: Context, count: number, shape: string): void {
  if (ctx.args.length < count) throw new UsageError(`missing arguments: expected ${shape}`);
  if (ctx.args.length > count) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
}

function printJson(ctx: Context, value: unknown): number {
  ctx.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  return 0;
}

/** A validated auth URL without trailing slash. */
function authUrlOf(url: string): string {
  try {
    return parseSettings({ syncAuthUrl: url }).syncAuthUrl.replace(/\/+$/, '');
  } catch (err: unknown) {
    if (err instanceof SettingsError) throw new UsageError(`--auth ${errorLine(err)}`);
    throw err;
  }
}

async function login(ctx: Context): Promise<number> {
  if (ctx.args.length > 1) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  if (ctx.flags.auth === undefined) throw new UsageError('--auth URL is required');
  const email = ctx.args[0];
  const authUrl = authUrlOf(ctx.flags.auth);
  const auth = createAuthClient({ authUrl });
  const device = {
    deviceName: ctx.flags['device-name'] ?? hostname(),
    platform: ctx.flags.platform ?? process.platform,
  };
  let signed: SignedIn;
  if (ctx.flags.token !== undefined) {
    signed = await signInWithToken(auth, ctx.flags.token, device, ctx.flags.jwt ? 'jwt' : 'device');
  } else if (email === undefined || (await auth.hostInfo()).smtp === false) {
    if (email !== undefined) {
      ctx.io.stderr.write(
        `This host sends no e-mail (no SMTP): pairing instead. The host prints a sign-in link for ${email}; open it, paste it here, or approve the code below.\n`,
      );
    }
    signed = await loginByPairing(ctx.io, auth, { ...device, email });
  } else {
    const variant = ctx.flags.jwt ? 'jwt' : 'device';
    await auth.requestLogin(email, variant);
    ctx.io.stderr.write(`A login link was sent to ${email}.\n`);
    const token = await readLine(ctx.io, 'Paste the token or the whole link from the e-mail: ');
    if (token === undefined) {
      throw new SyncError('no_token', 'no token or link was given on standard input');
    }
    signed = await auth.signIn(token, device, variant);
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
  });
  ctx.io.stdout.write(
    `Signed in as ${signed.user.email} on ${authUrl}: device ${signed.device.id} "${signed.device.deviceName}" (credentials in ${ctx.store.path})\n`,
  );
  return 0;
}

/** Removes this device at the host (its token stops working) and forgets the credential. */
async function logout(ctx: Context): Promise<number> {
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
async function pairCommand(ctx: Context): Promise<number> {
  const action = ctx.args.shift();
  if (action !== 'approve' && action !== 'deny')
    throw new UsageError('expected: pair approve <code> or pair deny <code>');
  expectArgs(ctx, 1, '<code>');
  const { auth, credential } = await signedIn(ctx);
  const code = ctx.args[0]!;
  if (action === 'deny') {
    await auth.denyPairing(code);
    ctx.io.stderr.write(`Denied: the device showing ${code} was refused.\n`);
    return 0;
  }
  const device = await auth.approvePairing(code);
  ctx.io.stderr.write(
    `Approved: device ${device.id} "${device.deviceName}" (${device.platform}) joined ${credential.email}.\n`,
  );
  return 0;
}

/** The stored credential for `--auth`, or the only one stored. */
async function signedIn(ctx: Context) {
  const stored = ctx.store.authUrls();
  let authUrl: string;
  if (ctx.flags.auth !== undefined) {
    authUrl = authUrlOf(ctx.flags.auth);
  } else if (stored.length === 1) {
    authUrl = stored[0]!;
  } else if (stored.length === 0) {
    throw new SyncError(
      'not_signed_in',
      'not signed in: run sync-host login <email> --auth <URL> first',
    );
  } else {
    throw new UsageError(`several auth services are stored, pass --auth (${stored.join(', ')})`);
  }
  const credential = ctx.store.get(authUrl);
  if (credential === undefined) {
    throw new SyncError('not_signed_in', `not signed in on ${authUrl}: run sync-host login first`);
  }
  return {
    authUrl,
    credential,
    auth: createAuthClient({ authUrl, deviceToken: credential.deviceToken }),
  };
}

async function relayUrl(ctx: Context, auth: AuthClient): Promise<string> {
  const url = ctx.flags.relay ?? (await auth.hostInfo()).relayUrl;
  try {
    return parseSettings({ syncRelayUrl: url }).syncRelayUrl;
  } catch (err: unknown) {
    if (err instanceof SettingsError) throw new UsageError(`relay URL ${errorLine(err)}`);
    throw err;
  }
}

async function findProject(auth: AuthClient, key: string): Promise<Project> {
  const project = (await auth.projects()).find((p) => p.projectKey === key);
  if (project === undefined) {
    throw new SyncError(
      'not_found',
      `no project with key "${key}": register it with sync-host project add "${key}" <name>`,
    );
  }
  return project;
}

/** Joins the project's room as this device. */
async function openRoom(ctx: Context, projectKey: string): Promise<RelayConnection> {
  return (await openRoomOf(ctx, projectKey)).connection;
}

async function openRoomOf(ctx: Context, projectKey: string) {
  const { auth, credential, authUrl } = await signedIn(ctx);
  const project = await findProject(auth, projectKey);
  const connection = createRelayConnection({
    url: await relayUrl(ctx, auth),
    room: project.roomId,
    device: String(credential.deviceId),
    token: credential.deviceToken,
    WebSocket,
  });
  return { connection, authUrl };
}

/** Resolves at SIGINT or SIGTERM. */
function stopSignal(): Promise<'stopped'> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('stopped'));
    process.once('SIGTERM', () => resolve('stopped'));
  });
}

async function syncFolder(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  let passphrase: string | undefined;
  if (ctx.flags.encrypt) {
    passphrase = await readSecret(
      ctx.io,
      'Encryption passphrase (the same on every device, not shown): ',
    );
    if (passphrase === undefined) throw new UsageError('--encrypt needs a passphrase on stdin');
  }
  const { connection, authUrl } = await openRoomOf(ctx, projectKey);
  return runFolderSync({
    io: ctx.io,
    connection,
    dir,
    state: statePath(ctx.store.dir, authUrl, projectKey, dir),
    passphrase,
    stopped: stopSignal(),
  });
}

/** Rejects with `what` after `ms`; the timer is cleared by `cancel`. */
function deadline(ms: number, what: string): { promise: Promise<never>; cancel: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SyncError('timeout', what)), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

async function send(ctx: Context): Promise<number> {
  expectArgs(ctx, 3, '<projectKey> <to> <json>');
  const [projectKey, to, json] = ctx.args as [string, string, string];
  let payload: unknown;
  try {
    payload = JSON.parse(json);
  } catch (err: unknown) {
    if (!(err instanceof SyntaxError)) throw err;
    throw new UsageError('<json> is not valid JSON');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new UsageError('<json> must be a JSON object');
  }
  const seconds = ctx.flags.timeout === undefined ? 10 : Number(ctx.flags.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError('--timeout must be a positive number of seconds');
  }
  const connection = await openRoom(ctx, projectKey);
  const relayErrors: SyncError[] = [];
  connection.on('error', (err) => relayErrors.push(err));
  const limit = deadline(
    seconds * 1000,
    `the message was not delivered to the relay within ${seconds} s`,
  );
  try {
    await Promise.race([connection.connect(), limit.promise]);
    connection.send(to, payload as Record<string, unknown>);
    await Promise.race([connection.flush(), limit.promise]);
    const failed = relayErrors[0];
    if (failed !== undefined) throw failed;
    return 0;
  } finally {
    limit.cancel();
    if (connection.state !== 'closed') await connection.close();
  }
}

async function listen(ctx: Context): Promise<number> {
  expectArgs(ctx, 1, '<projectKey>');
  const connection = await openRoom(ctx, ctx.args[0]!);
  const { stdout, stderr } = ctx.io;
  connection.on('joined', (frame) => {
    stderr.write(
      `joined room ${frame.room} as device ${frame.device} (${frame.role}); ${frame.buffered} buffered message(s) follow${frame.gap ? '; some messages were lost while away (gap)' : ''}\n`,
    );
  });
  connection.on('message', (message) => {
    stdout.write(`${JSON.stringify(message)}\n`);
  });
  connection.on('presence', (frame) => stderr.write(`device ${frame.device} ${frame.state}\n`));
  connection.on('host', (frame) => stderr.write(`device ${frame.device} is now the host\n`));
  connection.on('state', (state) => {
    if (state === 'reconnecting') stderr.write('connection lost; reconnecting\n');
  });
  const ended = new Promise<SyncError | undefined>((resolve) => {
    connection.on('close', (info) => resolve(info.error));
  });
  connection.connect().catch(() => {
    // The close event reports why.
  });
  const stopped = stopSignal();
  const outcome = await Promise.race([stopped, ended]);
  if (outcome === 'stopped') {
    // No leave: the relay keeps buffering for this device, the next listen prints it first.
    await connection.close({ leave: false });
    return 0;
  }
  if (outcome !== undefined) throw outcome;
  return 0;
}
