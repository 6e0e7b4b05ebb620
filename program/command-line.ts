import { parseArgs } from 'node:util';
import { clientCommands } from '../client/cli/commands.ts';
import { authKeyNames } from '../server/config/auth-config.ts';
import { relayKeyNames } from '../server/config/relay-config.ts';
import { closestKey } from '../server/config/suggest.ts';

/** The options of the server modes (`--headless`, `auth`, `relay`, `discover`). */
const options = {
  headless: { type: 'boolean' },
  'config-dir': { type: 'string' },
  'log-level': { type: 'string' },
  timeout: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

/** The modes `bin/sync-host` runs itself (the client commands are dispatched before parsing). */
export const serverModes: readonly string[] = ['serve', 'auth', 'relay', 'discover'];

/** Other first words main() answers (`sync-host config check`), not refused as unknown here. */
const otherCommands: readonly string[] = ['config'];

/** The parsed command line of a server mode. */
export type CommandLine = ReturnType<typeof parseStrict>;

function parseStrict(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, strict: true, options });
}

/** A mistake on the command line: the one line to print (without the `sync-host: ` prefix). */
export class CommandLineMistake extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandLineMistake';
  }
}

const seeHelp = '(see sync-host --help)';
const seeConfiguration = 'see docs/configuration.md';

/**
 * Parses the command line of the server modes. A mistake (an unknown or misspelt option or
 * command, a configuration key written as a flag, a missing value) throws CommandLineMistake
 * with one line that says what was meant; option values are never repeated in it.
 */
export function parseCommandLine(argv: string[]): CommandLine {
  const { tokens } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    tokens: true,
    options,
  });
  const headless = tokens.some((t) => t.kind === 'option' && t.name === 'headless');
  // `sync-host relay --port 9443` means the relay's port, not the auth service's.
  const relayAlone =
    !headless && tokens.some((t) => t.kind === 'positional' && t.value === 'relay');
  let firstPositional = true;
  for (const token of tokens) {
    if (token.kind === 'positional') {
      if (firstPositional && !headless) checkCommand(token.value);
      firstPositional = false;
      continue;
    }
    if (token.kind !== 'option') continue;
    const option = (options as Record<string, { type: 'boolean' | 'string' }>)[token.name];
    if (option === undefined) throw new CommandLineMistake(unknownOption(token, relayAlone));
    if (option.type === 'string' && (token.value === undefined || isDashed(token))) {
      throw new CommandLineMistake(`${token.rawName} needs a value ${seeHelp}`);
    }
    if (option.type === 'boolean' && token.value !== undefined) {
      throw new CommandLineMistake(`${token.rawName} takes no value ${seeHelp}`);
    }
  }
  try {
    return parseStrict(argv);
  } catch (err: unknown) {
    // Not expected after the checks above; node's own first line, still without a stack.
    const message = err instanceof Error ? err.message : String(err);
    throw new CommandLineMistake(`${message.split('\n')[0]} ${seeHelp}`);
  }
}

/** `--config-dir --headless`: the next flag was taken as the value. */
function isDashed(token: { value?: string | undefined; inlineValue?: boolean | undefined }) {
  return token.inlineValue === false && token.value?.startsWith('-') === true;
}

/** Refuses a first word that is neither a mode nor a client command, naming the close one. */
function checkCommand(word: string): void {
  const known = [...serverModes, ...otherCommands, ...clientCommands];
  if (word === '' || known.includes(word)) return;
  const meant = closestKey(word, known);
  throw new CommandLineMistake(
    meant === undefined
      ? `unknown command ${word} ${seeHelp}`
      : `unknown command ${word}: did you mean ${meant}? ${seeHelp}`,
  );
}

/** The line for an option this program does not have (`relayAlone`: in `sync-host relay`). */
function unknownOption(token: { name: string; rawName: string }, relayAlone: boolean): string {
  const { name, rawName } = token;
  if (rawName.startsWith('--')) {
    // A mode written as a flag; `--auth URL` is also the client commands' option.
    if (name === 'auth')
      return `unknown option --auth: did you mean sync-host auth, or sync-host login --auth URL? ${seeHelp}`;
    if (serverModes.includes(name))
      return `unknown option ${rawName}: did you mean sync-host ${name}? ${seeHelp}`;
    const option = closestKey(name, Object.keys(options));
    if (option !== undefined)
      return `unknown option ${rawName}: did you mean --${option}? ${seeHelp}`;
    // `--config` for --config-dir: too short for the edit distance, but only one option begins so.
    const begun = Object.keys(options).filter(
      (known) => name.length >= 3 && known.startsWith(name),
    );
    if (begun.length === 1)
      return `unknown option ${rawName}: did you mean --${begun[0]}? ${seeHelp}`;
    const setting = configurationKeyLine(name, relayAlone);
    if (setting !== undefined)
      return `${rawName} is not an option: ${setting}; ${seeConfiguration}`;
    const key = closestKey(
      name,
      Object.values(authKeyNames).map((spellings) => spellings[0] ?? ''),
    );
    if (key !== undefined)
      return `unknown option ${rawName}: did you mean ${key} in auth.conf? (${seeConfiguration})`;
  }
  return `unknown option ${rawName} ${seeHelp}`;
}

/** What a configuration key is, for the keys people most often try as flags. */
const meaningOf: Readonly<Record<string, string>> = {
  PORT: 'the auth port',
  BIND: 'the listen address',
  DATA_DIR: 'the data folder',
  MDNS: 'LAN discovery (mDNS)',
  AUTH_SECRET: 'the shared secret',
  AUTH_BASE_URL: "the auth service's public URL",
  RELAY_URL: 'the relay URL given to clients',
  DB_HOST: 'the database server',
  DB_PATH: 'the SQLite file',
  DB_DRIVER: 'the database kind',
  SMTP_HOST: 'the mail server',
  DEFAULT_TIER: 'the tier of new users',
  'ws.port': 'the relay port',
  'status.port': "the relay's status port",
};

/** The configuration key a flag names: spelt alike, or the last part of a dotted key. */
function keyNamedBy(
  flag: string,
  names: Readonly<Record<string, readonly string[]>>,
): string | undefined {
  const same = (a: string, b: string) => normalise(a) === normalise(b);
  const exact = Object.values(names).find((spellings) => spellings.some((s) => same(s, flag)));
  if (exact !== undefined) return exact[0];
  // `--secret` for auth.secret; `--host` (db.host, smtp.host) names no one key.
  const byLastPart = Object.values(names).filter((spellings) =>
    spellings.some((s) => s.includes('.') && same(s.slice(s.lastIndexOf('.') + 1), flag)),
  );
  return byLastPart.length === 1 ? byLastPart[0]?.[0] : undefined;
}

/**
 * Flags people try that name a key in other words (`--relay-port` for ws.port), by their
 * normalised spelling.
 */
const flagAliases: Readonly<Record<string, { authKey?: string; relayKey?: string }>> = {
  authport: { authKey: 'PORT' },
  adminport: { authKey: 'PORT' },
  httpport: { authKey: 'PORT' },
  relayport: { relayKey: 'ws.port' },
  websocketport: { relayKey: 'ws.port' },
  relaystatusport: { relayKey: 'status.port' },
};

/** The auth.conf and relay.conf keys a flag names (either may be undefined). */
function keysNamedBy(
  flag: string,
  relayAlone: boolean,
): { authKey?: string | undefined; relayKey?: string | undefined } {
  const alias = flagAliases[normalise(flag)];
  if (alias !== undefined) return alias;
  if (relayAlone && normalise(flag) === 'port') return { relayKey: 'ws.port' };
  return { authKey: keyNamedBy(flag, authKeyNames), relayKey: keyNamedBy(flag, relayKeyNames) };
}

/** Flags that name a group of keys (`--db-url`, `--database`, `--smtp`). */
const groups: Readonly<Record<string, { prefix: string; what: string }>> = {
  db: { prefix: 'DB_', what: 'database' },
  database: { prefix: 'DB_', what: 'database' },
  smtp: { prefix: 'SMTP_', what: 'mail server' },
  mail: { prefix: 'SMTP_', what: 'mail server' },
};

const normalise = (word: string) => word.toLowerCase().replace(/[._-]/g, '');

/**
 * Where the setting a flag tries to make lives (auth.conf, the environment, relay.conf), or
 * undefined when the flag names no configuration key.
 */
function configurationKeyLine(flag: string, relayAlone: boolean): string | undefined {
  const { authKey, relayKey } = keysNamedBy(flag, relayAlone);
  if (authKey !== undefined) {
    // auth.conf's keys are also read from environment variables of their upper-case name.
    const where = `${authKey} in auth.conf (or the ${authKey} environment variable)`;
    const relayToo =
      relayKey === undefined ? '' : `, ${relayKey} in relay.conf for the relay alone`;
    const meaning = meaningOf[authKey];
    return meaning === undefined ? `set ${where}${relayToo}` : `${meaning} is ${where}${relayToo}`;
  }
  if (relayKey !== undefined) {
    const meaning = meaningOf[relayKey];
    return meaning === undefined
      ? `set ${relayKey} in relay.conf`
      : `${meaning} is ${relayKey} in relay.conf`;
  }
  // `--db-url`, `--smtp`: the keys of that group.
  const group = groups[normalise(flag.split(/[-_.]/)[0] ?? '')];
  if (group === undefined) return undefined;
  const members = Object.values(authKeyNames)
    .map((spellings) => spellings[0] ?? '')
    .filter((key) => key.startsWith(group.prefix));
  const last = members.pop();
  return `the ${group.what} is set by ${members.join(', ')} and ${last} in auth.conf`;
}
