import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { type AuthClient, createAuthClient } from '../auth-client.ts';
import type { Project } from '../auth-types.ts';
import { AuthServiceError, SettingsError, SyncError } from '../errors.ts';
import { createRelayConnection, type RelayConnection } from '../relay-connection.ts';
import { parseSettings } from '../settings.ts';
import { CredentialStore, configDir } from './credentials.ts';
import { type CliIo, processIo, readLine } from './io.ts';

export const clientUsage = `Client commands:
  sync-host login <email> --auth URL [--device-name N] [--platform P] [--token T] [--jwt]
      request a login link, then paste the token or the whole link (--token skips the request;
      --jwt uses the JWT flow: POST /auth/magic-link, verify, POST /auth/devices)
  sync-host devices                     list this user's devices (JSON)
  sync-host projects                    list synced projects (JSON)
  sync-host project add <key> <name>    register a workspace (idempotent); prints the project
  sync-host subscription                tier, effective tier, expiry and project limit (JSON)
  sync-host send <projectKey> <to> <json>
      join the project's room, send {"to","payload"} (to: host, broadcast or a device id), exit
  sync-host listen <projectKey>         print each message for this device as one JSON line

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
    case 'devices':
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.devices());
    case 'projects':
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.projects());
    case 'subscription':
      expectArgs(ctx, 0, '');
      return printJson(ctx, await (await signedIn(ctx)).auth.subscription());
    case 'project': {
      if (ctx.args[0] !== 'add') throw new UsageError('expected: project add <key> <name>');
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
  expectArgs(ctx, 1, '<email>');
  if (ctx.flags.auth === undefined) throw new UsageError('--auth URL is required');
  const email = ctx.args[0]!;
  const authUrl = authUrlOf(ctx.flags.auth);
  const auth = createAuthClient({ authUrl });
  const variant = ctx.flags.jwt ? 'jwt' : 'device';
  let token = ctx.flags.token;
  if (token === undefined) {
    await auth.requestLogin(email, variant);
    ctx.io.stderr.write(`A login link was sent to ${email}.\n`);
    token = await readLine(ctx.io, 'Paste the token or the whole link from the e-mail: ');
    if (token === undefined) {
      throw new SyncError('no_token', 'no token or link was given on standard input');
    }
  }
  const signed = await auth.signIn(
    token,
    {
      deviceName: ctx.flags['device-name'] ?? hostname(),
      platform: ctx.flags.platform ?? process.platform,
    },
    variant,
  );
  if (signed.user.email !== email.trim().toLowerCase()) {
    ctx.io.stderr.write(`note: the link was for ${signed.user.email}\n`);
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
  const { auth, credential } = await signedIn(ctx);
  const project = await findProject(auth, projectKey);
  return createRelayConnection({
    url: await relayUrl(ctx, auth),
    room: project.roomId,
    device: String(credential.deviceId),
    token: credential.deviceToken,
    WebSocket,
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
  const stopped = new Promise<'stopped'>((resolve) => {
    process.once('SIGINT', () => resolve('stopped'));
    process.once('SIGTERM', () => resolve('stopped'));
  });
  const outcome = await Promise.race([stopped, ended]);
  if (outcome === 'stopped') {
    // No leave: the relay keeps buffering for this device, the next listen prints it first.
    await connection.close({ leave: false });
    return 0;
  }
  if (outcome !== undefined) throw outcome;
  return 0;
}
