import { parseArgs } from 'node:util';
import { createAuthClient } from '../auth-client.ts';
import { AuthServiceError, SettingsError, SyncError } from '../errors.ts';
import { parseSettings } from '../settings.ts';
import type { CredentialStore } from './credentials.ts';
import type { CliIo } from './io.ts';
import { printableJson } from './printable.ts';

/** A mistake on the command line: exit 2. */
export class UsageError extends Error {}

/** The options every client command accepts (strict: an unknown one is a usage error). */
export function parseCommandLine(argv: string[]) {
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
      'passphrase-file': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
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
}

/** The one line an error prints as on stderr. */
export function errorLine(err: unknown): string {
  if (err instanceof AuthServiceError) {
    const hint = err.code === 'unauthorized' ? '; sign in again with sync-host login' : '';
    return `${err.message} (${err.code}, HTTP ${err.status})${hint}`;
  }
  if (err instanceof SettingsError) return err.message.replace(/^sync(Auth|Relay)Url /, '');
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
    if (err instanceof SettingsError) throw new UsageError(`--auth ${errorLine(err)}`);
    throw err;
  }
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
