import { existsSync, lstatSync, mkdirSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { SyncError } from '../errors.ts';
import { type Context, expectArgs, signedIn, UsageError, unknownSubcommand } from './context.ts';
import { passphraseSource } from './passphrase.ts';
import { printable } from './printable.ts';
import { syncUnit, systemdUnitName } from './systemd-unit.ts';

/** The launcher of a development checkout (this node with `bin/sync-host`), unless given. */
const sourceLauncher = [process.execPath, resolve(import.meta.dirname, '../../bin/sync-host')];

/** `~/.config/systemd/user` (or under `$XDG_CONFIG_HOME`): where systemd looks for user units. */
function userUnitFolder(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config'), 'systemd', 'user');
}

/** A unit name as a shell argument: quoted when it holds escapes. */
function shellWord(name: string): string {
  return /^[A-Za-z0-9:_.-]+$/.test(name) ? name : `'${name}'`;
}

function unitNameOf(projectKey: string): string {
  const name = systemdUnitName(projectKey);
  if (name === undefined) throw new UsageError('<projectKey> is too long for a systemd unit name');
  return name;
}

/** `service install <projectKey> <dir>` and `service remove <projectKey>`. */
export async function serviceCommand(ctx: Context): Promise<number> {
  const action = ctx.args.shift();
  if (action === 'install') return install(ctx);
  if (action === 'remove') return remove(ctx);
  if (action !== undefined) throw unknownSubcommand('service', action, ['install', 'remove']);
  throw new UsageError(
    'expected: service install <projectKey> <dir> [--encrypt --passphrase-file F] or service remove <projectKey>',
  );
}

/**
 * Writes a systemd user unit running `sync <projectKey> <dir>` with this device's credentials
 * (and `--auth`, `--relay`, `--encrypt --passphrase-file` as given), and prints how to enable
 * it. Not on Linux: prints the command to run at login instead.
 */
async function install(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  if (ctx.flags.encrypt && ctx.flags['passphrase-file'] === undefined) {
    throw new UsageError('a service cannot type a passphrase: --encrypt needs --passphrase-file F');
  }
  passphraseSource(ctx); // checks the file now (mode 0600/0400, a first line), not at the first start
  const { authUrl } = await signedIn(ctx);
  const command = [
    ...(ctx.launcher ?? sourceLauncher),
    'sync',
    projectKey,
    resolve(dir),
    '--auth',
    authUrl,
  ];
  if (ctx.flags.relay !== undefined) command.push('--relay', ctx.flags.relay);
  const file = ctx.flags['passphrase-file'];
  if (file !== undefined) command.push('--encrypt', '--passphrase-file', resolve(file));
  const configDir = resolve(ctx.store.dir);
  const { stdout } = ctx.io;
  if (process.platform !== 'linux') {
    stdout.write(
      [
        'systemd user services are for Linux. Elsewhere, run this at login (see docs/client.md,',
        '"Running sync as a service"): a LaunchAgent on macOS, a Task Scheduler task "At log on"',
        'on Windows, with the environment variable and the arguments below:',
        `  SYNC_HOST_CONFIG_DIR=${JSON.stringify(configDir)}`,
        `  ${command.map((word) => JSON.stringify(word)).join(' ')}`,
        '',
      ].join('\n'),
    );
    return 0;
  }
  const unitName = unitNameOf(projectKey);
  let text: string;
  try {
    text = syncUnit({ unitName, configDir, command });
  } catch (err: unknown) {
    if (err instanceof RangeError) throw new UsageError(err.message);
    throw err;
  }
  const folder = userUnitFolder(ctx.env);
  const path = join(folder, unitName);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  writeFileSync(`${path}.tmp`, text, { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
  stdout.write(
    [
      `Wrote ${printable(path)}. Start it now and at every login with:`,
      '  systemctl --user daemon-reload',
      `  systemctl --user enable --now ${shellWord(unitName)}`,
      `Its output: journalctl --user -u ${shellWord(unitName)}. To keep it running while you are`,
      'logged out: loginctl enable-linger',
      '',
    ].join('\n'),
  );
  return 0;
}

/** Deletes the unit of `<projectKey>` (and its enable link); prints how to stop it. */
async function remove(ctx: Context): Promise<number> {
  expectArgs(ctx, 1, '<projectKey>');
  const unitName = unitNameOf(ctx.args[0]!);
  const folder = userUnitFolder(ctx.env);
  const path = join(folder, unitName);
  if (!existsSync(path)) {
    throw new SyncError('not_found', `there is no ${printable(path)}`);
  }
  const link = join(folder, 'default.target.wants', unitName);
  if (lstatSync(link, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(link);
  unlinkSync(path);
  ctx.io.stdout.write(
    [
      `Removed ${printable(path)}. If it is running, stop it and reload:`,
      `  systemctl --user stop ${shellWord(unitName)}`,
      '  systemctl --user daemon-reload',
      '',
    ].join('\n'),
  );
  return 0;
}
