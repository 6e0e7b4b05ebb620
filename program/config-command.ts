import { parseArgs } from 'node:util';
import { ConfigError } from '../server/config/conf-file.ts';
import {
  type EffectiveConfig,
  type EffectiveEntry,
  effectiveConfig,
} from '../server/config/effective.ts';
import { ConfigProblems } from '../server/config/keys.ts';

const usage = `Usage: sync-host config check [--config-dir DIR] [--json]

Prints the configuration the host would run with: every key of auth.conf and relay.conf, its
value, and where it came from (the file and line, an environment variable, or the default).
Passwords and secrets are shown as **** with their length. Starts nothing, opens no database
and creates nothing. Exit 0 when the host would accept the configuration, 2 when not (one line
per problem, as at start).

Options:
  --config-dir DIR    the folder of auth.conf and relay.conf (default: the working directory)
  --json              one JSON object instead of the table
  --help

Every key: docs/configuration.md
`;

/** Exit code for a user mistake in configuration or on the command line. */
const exitUsage = 2;

/** `sync-host config …`: resolves with the process exit code. */
export async function runConfigCommand(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err: unknown) {
    process.stderr.write(
      `sync-host config: ${err instanceof Error ? err.message : String(err)} (see sync-host config --help)\n`,
    );
    return exitUsage;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const [command, ...extra] = positionals;
  if (command !== 'check' || extra.length > 0) {
    const what =
      command === undefined ? 'a command is missing' : `unknown command "${positionals.join(' ')}"`;
    process.stderr.write(`sync-host config: ${what}; the command is: sync-host config check\n`);
    return exitUsage;
  }
  let config: EffectiveConfig;
  try {
    config = effectiveConfig(values['config-dir'] ?? process.cwd());
  } catch (err: unknown) {
    if (err instanceof ConfigError || err instanceof ConfigProblems) {
      process.stderr.write(`sync-host: ${err.message.split('\n').join('\nsync-host: ')}\n`);
      return exitUsage;
    }
    throw err;
  }
  process.stdout.write(values.json ? `${JSON.stringify(config, null, 2)}\n` : table(config));
  return 0;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      'config-dir': { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** The human form: the files, then one line per key (key, source, value), then the warnings. */
function table(config: EffectiveConfig): string {
  const { auth, relay } = config.files;
  const found = (f: { path: string; found: boolean }) =>
    f.found ? f.path : `${f.path} (not found: defaults)`;
  const lines = [
    `Configuration folder: ${config.configDir}`,
    `  auth.conf:  ${found(auth)}`,
    `  relay.conf: ${found(relay)}`,
  ];
  const all = [...config.auth, ...config.relay];
  const keyWidth = Math.max(...all.map((e) => e.key.length));
  // The source before the value: a long value or note then breaks no column.
  const sourceWidth = Math.max(...all.map((e) => source(e).length));
  for (const [title, entries] of [
    ['auth.conf', config.auth],
    ['relay.conf', config.relay],
  ] as const) {
    lines.push('', title);
    for (const entry of entries) {
      lines.push(
        `  ${entry.key.padEnd(keyWidth)}  ${source(entry).padEnd(sourceWidth)}  ${shown(entry)}`,
      );
    }
  }
  if (config.warnings.length > 0) lines.push('');
  for (const warning of config.warnings) lines.push(`warning: ${warning}`);
  return `${lines.join('\n')}\n`;
}

function shown(entry: EffectiveEntry): string {
  const note = entry.note === undefined ? '' : ` (${entry.note})`;
  if (entry.secret) return `**** (${entry.length} characters)${note}`;
  const { value } = entry;
  if (value === null) return entry.note === undefined ? '(not set)' : `(not set: ${entry.note})`;
  const text =
    typeof value === 'boolean'
      ? value
        ? 'on'
        : 'off'
      : Array.isArray(value)
        ? value.length === 0
          ? '(none)'
          : value.join(', ')
        : String(value);
  return `${text}${note}`;
}

function source(entry: EffectiveEntry): string {
  if (entry.source === 'file') {
    return `${entry.file}:${entry.line}${entry.spelling === undefined ? '' : ` (${entry.spelling})`}`;
  }
  if (entry.source === 'env') return `env ${entry.variable}`;
  return 'default';
}
