import { parseArgs } from 'node:util';
import { createAuthClient } from '../auth-client.ts';
import {
  AuthServiceError,
  SettingsError,
  SyncError,
  UnreachableError,
  WrongServiceError,
  wrongServiceLabels,
} from '../errors.ts';
import { pinnedFetch } from '../pinning.ts';
import { defaultAuthPort } from '../service-check.ts';
import { parseSettings } from '../settings.ts';
import type { CredentialStore } from './credentials.ts';
import type { CliIo } from './io.ts';
import { printableJson } from './printable.ts';
import { didYouMean } from './suggest.ts';

/** A mistake on the command line: exit 2. */
export class UsageError extends Error {}

const options = {
  auth: { type: 'string' },
  relay: { type: 'string' },
  'device-name': { type: 'string' },
  platform: { type: 'string' },
  token: { type: 'string' },
  jwt: { type: 'boolean' },
  timeout: { type: 'string' },
  encrypt: { type: 'boolean' },
  'passphrase-file': { type: 'string' },
  json: { type: 'boolean' },
  fingerprint: { type: 'string' },
  account: { type: 'string' },
  at: { type: 'string' },
  'max-file-bytes': { type: 'string' },
  'no-perms': { type: 'boolean' },
  'new-passphrase': { type: 'boolean' },
  viewer: { type: 'boolean' },
  all: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * The options every client command accepts (strict: an unknown one is a usage error naming the
 * closest known option, `unknown option --auht: did you mean --auth?`).
 */
export function parseCommandLine(argv: string[]) {
  try {
    return parseArgs({ args: joinDashValues(argv), allowPositionals: true, strict: true, options });
  } catch (err: unknown) {
    throw usageOfParseError(err);
  }
}

/**
 * A value that starts with `-` joined to its option (`--fingerprint -Abc…` → `--fingerprint=-Abc…`):
 * a base64url fingerprint starts with `-` one time in 64, and node:util refuses such a value as
 * ambiguous. Only after an option that takes a value, and only when the word is no option.
 */
function joinDashValues(argv: string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const word = argv[i]!;
    const next = argv[i + 1];
    const name = word.startsWith('--') ? word.slice(2) : undefined;
    const takesValue =
      name !== undefined &&
      !name.includes('=') &&
      options[name as keyof typeof options]?.type === 'string';
    if (takesValue && next?.startsWith('-') && !isOption(next)) {
      joined.push(`${word}=${next}`);
      i += 1;
    } else joined.push(word);
  }
  return joined;
}

function isOption(word: string): boolean {
  if (word === '-h') return true;
  return word.startsWith('--') && word.slice(2).split('=')[0]! in options;
}

/** Options people try for the host's address, which the client takes as one URL. */
const hostWords: ReadonlySet<string> = new Set(['port', 'host', 'server', 'url', 'address']);
const inAuthUrl =
  "the host's address and port go in --auth URL, as the host prints it at start (https://<host>:8445)";

/** node:util's parse errors, said in one short line of ours. */
function usageOfParseError(err: unknown): unknown {
  if (!(err instanceof TypeError) || !('code' in err)) return err;
  const unknown = /^Unknown option '(-[^']*)'/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown !== undefined) {
    const name = unknown.replace(/^-+/, '');
    const meant = didYouMean(name, Object.keys(options), '--');
    const where = meant === '' && hostWords.has(name.toLowerCase()) ? `: ${inAuthUrl}` : meant;
    return new UsageError(`unknown option ${unknown}${where}`);
  }
  const missing =
    /^Option '(--[\w-]+)(?: <value>)?' argument missing/.exec(err.message)?.[1] ??
    /^Option '(--[\w-]+)' argument is ambiguous/.exec(err.message)?.[1];
  if (missing !== undefined) return new UsageError(`option ${missing} needs a value`);
  const needless = /^Option '(--[\w-]+)' does not take an argument/.exec(err.message)?.[1];
  if (needless !== undefined) return new UsageError(`option ${needless} takes no value`);
  return new UsageError(err.message);
}

/**
 * A UsageError for an unknown subcommand (`devices remvoe`), naming the closest of `known`:
 * `unknown devices command "remvoe": did you mean remove?`.
 */
export function unknownSubcommand(command: string, typed: string, known: string[]): UsageError {
  const hint = didYouMean(typed, known) || `: expected ${known.join(' or ')}`;
  return new UsageError(`unknown ${command} command "${typed}"${hint}`);
}

type Flags = ReturnType<typeof parseCommandLine>['values'];

/**
 * What a command runs with: its streams, options, remaining positionals, stored credentials and
 * environment (read here once, as main received it).
 */
export interface Context {
  io: CliIo;
  flags: Flags;
  args: string[];
  store: CredentialStore;
  env: NodeJS.ProcessEnv;
  /**
   * The command line that starts this copy of the program (what `service install` writes into
   * the unit); default: this node with the checkout's `bin/sync-host`.
   */
  launcher?: string[] | undefined;
}

/**
 * The one line an error prints as on stderr. `authUrl`: the auth service the command used, when
 * known, for the command that pairs this device again.
 */
export function errorLine(err: unknown, authUrl?: string): string {
  if (err instanceof AuthServiceError) {
    const hint =
      err.code === 'unauthorized'
        ? `; this device's token is not accepted there (the device was removed, or signed in again elsewhere): pair it again with sync-host login --auth ${authUrl ?? '<URL>'}`
        : err.code === 'tls_required'
          ? '; give the auth URL with https:// (the host prints it at start)'
          : '';
    return `${err.message} (${err.code}, HTTP ${err.status})${hint}`;
  }
  if (err instanceof WrongServiceError) {
    return `${err.givenUrl} is ${wrongServiceLabels[err.service]}, not the auth service; the auth service is on port 8445 by default: sync-host login --auth ${err.authUrl}`;
  }
  if (err instanceof UnreachableError) {
    if (err.reason === 'refused')
      return `${err.message}; is the host running? it prints its URLs at start`;
    if (err.reason === 'other') return err.message;
    if (err.reason === 'not_tls')
      return `${err.message}; give it with http:// if the host runs with TLS=off (it prints its URLs at start; the relay's status port is plain HTTP too)`;
    return `${err.message}; check the address; on the same LAN, sync-host discover lists hosts`;
  }
  if (err instanceof SettingsError) return err.message.replace(/^sync(Auth|Relay)Url /, '');
  // The code says nothing more than the sentence for a device that is not signed in yet.
  if (err instanceof SyncError && err.code === 'not_signed_in') return err.message;
  if (err instanceof SyncError) return `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

/** Throws a UsageError unless exactly `count` positionals are left (`shape` names them). */
export function expectArgs(ctx: Context, count: number, shape: string): void {
  if (ctx.args.length < count) throw new UsageError(`missing arguments: expected ${shape}`);
  if (ctx.args.length > count) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
}

/**
 * Prints `value` as indented JSON on stdout, with the characters a terminal would act on
 * escaped (device names and the like come from elsewhere); exit code 0.
 */
export function printJson(ctx: Context, value: unknown): number {
  ctx.io.stdout.write(`${printableJson(value, 2)}\n`);
  return 0;
}

/** A validated auth URL without trailing slash. */
export function authUrlOf(url: string): string {
  try {
    return parseSettings({ syncAuthUrl: url }).syncAuthUrl.replace(/\/+$/, '');
  } catch (err: unknown) {
    if (err instanceof SettingsError) {
      // The relay's address given where the auth service's goes: say which one that is.
      const relay = /^ws(s?):\/\/([^/:]+|\[[^\]]+\])/i.exec(url);
      // wss:// is the relay with TLS: its auth service speaks https.
      const hint =
        relay === null
          ? ''
          : `; ${url} is the relay's address, the auth service is on port 8445 by default: sync-host login --auth http${relay[1]?.toLowerCase()}://${relay[2]}:8445`;
      throw new UsageError(`--auth ${errorLine(err)}${hint || schemeHint(url)}`);
    }
    throw err;
  }
}

/**
 * `192.168.1.5:8445` without its scheme: the URL it was probably meant to be. The host serves
 * https unless it runs with TLS=off, so https comes first.
 */
function schemeHint(url: string): string {
  const bare = url.trim();
  const parts = /^([^/:\s]+|\[[^\]\s]+\])(:\d+)?(\/\S*)?$/.exec(bare);
  if (parts === null) return '';
  // Without a port the URL would mean 443 or 80; the auth service is on 8445 unless moved.
  const meant = `${parts[1]}${parts[2] ?? `:${defaultAuthPort}`}${parts[3] ?? ''}`;
  return `: did you mean https://${meant} (or http://${meant} for a host with TLS=off)?`;
}

/** What every command run before the first login says: pairing is the way in. */
export const notSignedIn =
  'not signed in: run sync-host login --auth <URL> to pair this device (the host prints its auth URL at start; sync-host discover finds hosts on the LAN)';

/** The auth service a command talks to: `--auth`, or the only one stored; else undefined. */
export function authUrlInUse(ctx: Context): string | undefined {
  if (ctx.flags.auth !== undefined) return ctx.flags.auth;
  const stored = ctx.store.authUrls();
  return stored.length === 1 ? stored[0] : undefined;
}

/** The stored credential for `--auth`, or the only one stored. */
export async function signedIn(ctx: Context) {
  const stored = ctx.store.authUrls();
  let authUrl: string;
  if (ctx.flags.auth !== undefined) {
    authUrl = authUrlOf(ctx.flags.auth);
  } else if (stored.length === 1) {
    authUrl = stored[0]!;
  } else if (stored.length === 0) {
    throw new SyncError('not_signed_in', notSignedIn);
  } else {
    throw new UsageError(`several auth services are stored, pass --auth (${stored.join(', ')})`);
  }
  const credential = ctx.store.get(authUrl);
  if (credential === undefined) {
    throw new SyncError(
      'not_signed_in',
      `not signed in on ${authUrl}: run sync-host login --auth ${authUrl} to pair this device`,
    );
  }
  return {
    authUrl,
    credential,
    auth: createAuthClient({
      authUrl,
      deviceToken: credential.deviceToken,
      fetch: credential.fingerprint === undefined ? undefined : pinnedFetch(credential.fingerprint),
    }),
  };
}
