import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isClientCommand } from '../client/cli/commands.ts';
import { collectWhenIdle } from '../client/idle-collection.ts';
import { shortFingerprint } from '../protocol/fingerprint.ts';
import { adminUrlLines } from '../server/admin/printed-url.ts';
import { appRoot, buildKind } from '../server/build-kind.ts';
import { type LogLevel, logLevels } from '../server/config/common.ts';
import { ConfigError } from '../server/config/conf-file.ts';
import { ConfigProblems } from '../server/config/keys.ts';
import { type LoadedConfig, loadConfig } from '../server/config/load.ts';
import type { Host, HostMode } from '../server/host.ts';
import { ListenError } from '../server/http-listen.ts';
import { createLogger, type Logger } from '../server/log.ts';
import { version } from '../server/version.ts';
import { type CommandLine, CommandLineMistake, parseCommandLine } from './command-line.ts';
import { fingerprintLine, nextStepLines } from './next-steps.ts';

const usage = `Usage: sync-host [mode] [options]

Modes:
  --headless, serve   auth service + relay in one process (what \`npm start\` runs)
  auth                the auth service alone (auth.conf)
  relay               the relay alone (relay.conf)
  discover            list sync hosts advertised on the LAN (mDNS) and exit
  config check        print the configuration and where each value comes from (every key: docs/configuration.md)
  (none)              the tray app when Electron is installed, else the headless host

Client commands (see \`sync-host login --help\`):
  login, logout, pair approve|deny, devices [remove], projects, project add|remove,
  subscription, send, listen, sync, service install|remove

Options:
  --config-dir DIR    read auth.conf and relay.conf from DIR (default: the working directory)
  --log-level LEVEL   ${logLevels.join(', ')} (also LOG_LEVEL; default info)
  --timeout SECONDS   how long discover listens (default 3)
  --help, --version
`;

/** Exit code for a user mistake in configuration or on the command line. */
const exitUsage = 2;
/** How long `discover` listens by default, in seconds. */
const discoverSeconds = 3;
/** A graceful shutdown taking longer than this exits with 1. */
const shutdownLimitMs = 5_000;

/** Runs the command line; resolves with the process exit code. */
export async function main(argv: string[]): Promise<number> {
  // Client subcommands (login, devices, projects, project, subscription, send, listen, sync, service): client/cli.
  if (isClientCommand(argv)) {
    // `service install` writes how to start this copy: the executable itself, or node with bin/.
    const launcher =
      buildKind === 'sea'
        ? [process.execPath]
        : [process.execPath, join(appRoot, 'bin', 'sync-host')];
    return (await import('../client/cli/main.ts')).runClientCommand(
      argv,
      undefined,
      undefined,
      launcher,
    );
  }
  // `sync-host config check`: its own options (--json); starts nothing.
  const configAt = configCommandAt(argv);
  if (configAt !== undefined) {
    const args = [...argv.slice(0, configAt), ...argv.slice(configAt + 1)];
    return (await import('./config-command.ts')).runConfigCommand(args);
  }
  let parsed: CommandLine;
  try {
    parsed = parseCommandLine(argv);
  } catch (err: unknown) {
    if (!(err instanceof CommandLineMistake)) throw err;
    process.stderr.write(`sync-host: ${err.message}\n`);
    return exitUsage;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${version}\n`);
    return 0;
  }
  const command = values.headless ? 'serve' : (positionals[0] ?? '');
  if (positionals.length > (values.headless ? 0 : 1)) {
    process.stderr.write(
      `sync-host: unexpected argument "${positionals.at(-1)}" (see sync-host --help)\n`,
    );
    return exitUsage;
  }
  switch (command) {
    case 'serve':
      return serve('headless', values);
    case 'auth':
    case 'relay':
      return serve(command, values);
    case 'discover':
      return discover(values);
    case '': {
      const trayExit = await launchTrayApp(argv);
      if (trayExit !== undefined) return trayExit;
      process.stdout.write(
        'note: the Electron tray app is not installed; starting the headless host\n',
      );
      return serve('headless', values);
    }
    default:
      // parseCommandLine refuses any other word.
      process.stderr.write(`sync-host: unknown command ${command} (see sync-host --help)\n`);
      return exitUsage;
  }
}

type Flags = CommandLine['values'];

/** The Electron executable when the `electron` package and its binary are installed. */
export function electronBinary(): string | undefined {
  // The single executable is the headless host only.
  if (buildKind === 'sea') return undefined;
  try {
    const pkgDir = dirname(createRequire(import.meta.url).resolve('electron/package.json'));
    const pathFile = join(pkgDir, 'path.txt');
    if (!existsSync(pathFile)) return undefined;
    const binary = join(pkgDir, 'dist', readFileSync(pathFile, 'utf8').trim());
    return existsSync(binary) ? binary : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts the Electron tray app when Electron's binary is installed and resolves with its exit
 * code; resolves undefined when it is not installed (the caller starts the headless host).
 */
async function launchTrayApp(argv: string[]): Promise<number | undefined> {
  const binary = electronBinary();
  if (binary === undefined) return undefined;
  // The compiled build made the Electron bundles already (npm run build).
  if (buildKind === 'source') {
    const { buildElectronBundles } = await import('../build/electron-bundle.ts');
    await buildElectronBundles();
  }
  const child = spawn(binary, [appRoot, ...argv], {
    stdio: 'inherit',
    env: { ...process.env, SYNC_HOST_CWD: process.cwd() },
  });
  return new Promise((resolve) => {
    child.once('error', (err: Error) => {
      process.stderr.write(
        `sync-host: cannot start the tray app (${err.message}); starting the headless host\n`,
      );
      resolve(undefined);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

/** `sync-host discover`: browses mDNS for a few seconds and prints each host found. */
async function discover(flags: Flags): Promise<number> {
  const seconds = flags.timeout === undefined ? discoverSeconds : Number(flags.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 60) {
    process.stderr.write('sync-host: --timeout must be a number of seconds between 0 and 60\n');
    return exitUsage;
  }
  process.stderr.write(`Looking for sync hosts on the LAN for ${seconds} s...\n`);
  // Loaded on demand, like the host: the client commands start without them.
  const { discoverHosts } = await import('../client/discovery.ts');
  const hosts = await discoverHosts(seconds * 1000, {
    onInvalid: (name, problem) =>
      process.stderr.write(`sync-host: ignoring "${name}": ${problem}\n`),
  });
  if (hosts.length === 0) {
    process.stdout.write(
      'No sync host found (is MDNS=on on the host, and are you on the same LAN?)\n',
    );
    return 0;
  }
  for (const host of hosts) {
    const certificate =
      host.fingerprint === undefined
        ? ''
        : `  certificate: ${shortFingerprint(host.fingerprint)} (sha256 ${host.fingerprint})\n`;
    process.stdout.write(
      `${host.name}\n  auth:    ${host.authUrl}\n  relay:   ${host.relayUrl}\n  version: ${host.version}\n${certificate}  sign in: sync-host login --auth ${host.authUrl}\n`,
    );
  }
  return 0;
}

function loadOrReport(configDir: string): LoadedConfig | undefined {
  try {
    return loadConfig(configDir);
  } catch (err: unknown) {
    if (err instanceof ConfigError || err instanceof ConfigProblems) {
      process.stderr.write(`sync-host: ${err.message.split('\n').join('\nsync-host: ')}\n`);
      return undefined;
    }
    throw err;
  }
}

async function serve(mode: HostMode, flags: Flags): Promise<number> {
  const flagLevel = flags['log-level']?.toLowerCase();
  if (flagLevel !== undefined && !(logLevels as readonly string[]).includes(flagLevel)) {
    process.stderr.write(`sync-host: --log-level must be one of ${logLevels.join(', ')}\n`);
    return exitUsage;
  }
  const config = loadOrReport(flags['config-dir'] ?? process.cwd());
  if (config === undefined) return exitUsage;
  const level =
    (flagLevel as LogLevel | undefined) ??
    (mode === 'relay' ? config.relay.logLevel : config.auth.logLevel);
  // A person at a terminal reads short lines; pipes and journald get one JSON object per line.
  const logger = createLogger(level, 2, { human: process.stderr.isTTY === true });
  for (const key of [...config.auth.unknownKeys, ...config.relay.unknownKeys])
    logger.warn(`unknown configuration key ignored: ${key}`);

  const print = (line: string) => process.stdout.write(`${line}\n`);
  // Everything the host writes (secret, admin token, SQLite files) is for its user only.
  process.umask(0o077);
  // Signals are heard from here on: one during the start (a database still unreachable) stops it.
  const stopping = stopSignal(logger);
  let host: Host;
  try {
    const { startHost } = await import('../server/host.ts');
    const { createAdminMount } = await import('../server/admin/index.ts');
    host = await startHost({
      mode,
      config,
      logger,
      print,
      signal: stopping.signal,
      mount: createAdminMount({ logger, defaultTier: config.auth.defaultTier }),
      sqliteEngine: process.env.SYNC_HOST_SQLITE_ENGINE === 'wasm' ? 'wasm' : undefined,
    });
  } catch (err: unknown) {
    // Stopped while starting: what was opened is closed, as on any other shutdown.
    if (stopping.signal.aborted) {
      stopping.stopped();
      return 0;
    }
    if (err instanceof ListenError || err instanceof ConfigError) {
      process.stderr.write(`sync-host: ${err.message}\n`);
      return exitUsage;
    }
    logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'cannot start');
    process.stderr.write(
      `sync-host: cannot start: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    return 1;
  }
  if (host.urls.auth) print(`auth:   ${host.urls.auth}`);
  if (host.urls.relay) print(`relay:  ${host.urls.relay}`);
  if (host.urls.status) print(`status: ${host.urls.status}`);
  for (const line of adminUrlLines(host)) print(line);
  if (host.fingerprint) print(fingerprintLine(host.fingerprint));
  for (const line of nextStepLines(host.urls)) print(line);
  logger.info({ mode }, 'sync-host started');
  // An idle host gives back the garbage of a large upload instead of holding it for hours.
  const collecting = collectWhenIdle({
    onCollect: (before, after) =>
      logger.debug(
        {
          heapBeforeMiB: Math.round(before / 1_048_576),
          heapAfterMiB: Math.round(after / 1_048_576),
        },
        'idle: garbage collected',
      ),
  });
  try {
    return await waitForSignal(host, logger, stopping);
  } finally {
    collecting.stop();
  }
}

/**
 * The process's stop: `signal` aborts at the first SIGINT/SIGTERM (logged; later ones are
 * ignored), and from then on the shutdown has 5 s before the process exits with 1.
 */
function stopSignal(logger: Logger): { signal: AbortSignal; stopped(): void } {
  const controller = new AbortController();
  let force: NodeJS.Timeout | undefined;
  const ignore = () => {};
  const stop = (signal: NodeJS.Signals) => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    process.on('SIGINT', ignore);
    process.on('SIGTERM', ignore);
    logger.info({ signal }, 'shutting down');
    force = setTimeout(() => {
      logger.error('shutdown took longer than 5 s; exiting');
      process.exit(1);
    }, shutdownLimitMs);
    force.unref();
    controller.abort();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return { signal: controller.signal, stopped: () => clearTimeout(force) };
}

/** Resolves with the exit code after the stop signal and a graceful close. */
function waitForSignal(host: Host, logger: Logger, stopping: ReturnType<typeof stopSignal>) {
  return new Promise<number>((resolve) => {
    const close = () => {
      host.close().then(
        () => {
          stopping.stopped();
          resolve(0);
        },
        (err: unknown) => {
          logger.error(
            { err: err instanceof Error ? err.message : String(err) },
            'shutdown failed',
          );
          resolve(1);
        },
      );
    };
    if (stopping.signal.aborted) close();
    else stopping.signal.addEventListener('abort', close, { once: true });
  });
}

/**
 * Where the word `config` stands when it is the command: first, or after `--config-dir DIR`
 * (`sync-host --config-dir /etc/sync-host config check`).
 */
function configCommandAt(argv: string[]): number | undefined {
  let at = 0;
  while (argv[at] === '--config-dir' || argv[at]?.startsWith('--config-dir=')) {
    at += argv[at] === '--config-dir' ? 2 : 1;
  }
  return argv[at] === 'config' ? at : undefined;
}
