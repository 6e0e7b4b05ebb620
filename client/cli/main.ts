import { SyncError } from '../errors.ts';
import {
  devicesCommand,
  projectCommand,
  projectsCommand,
  subscriptionCommand,
} from './account-commands.ts';
import { authUrlInUse, type Context, errorLine, parseCommandLine, UsageError } from './context.ts';
import { CredentialStore, configDir } from './credentials.ts';
import { history, restore } from './history-commands.ts';
import { type CliIo, processIo } from './io.ts';
import { login, logout, pairCommand } from './login-commands.ts';
import { printable } from './printable.ts';
import { listen, send } from './room-commands.ts';
import { serviceCommand } from './service-command.ts';
import { statusCommand } from './status-command.ts';
import { syncFolder } from './sync-command.ts';

export const clientUsage = `Client commands:
  sync-host login --auth URL [--device-name N] [--platform P] [--fingerprint F] [--account E]
      pair this device: shows a code (and a QR code of where to approve it) and waits until it
      is approved in the admin UI, on a signed-in device (pair approve) or by its e-mail link;
      the device is named "<host name> (<platform>)" unless --device-name is given (on a
      terminal, asked with that as the default)
      approved on a device, it joins that device's account only once you agree: asked on a
      terminal; a script passes --account E (the account's e-mail) and any other is declined
      an https:// host with a self-signed certificate is trusted by its fingerprint: shown and
      asked on a terminal, else given with --fingerprint (the certificate line the host prints);
      kept with the credentials, and a host showing another certificate later is refused
  sync-host login <email> --auth URL [--token T] [--jwt]
      with SMTP on the host: request a login link, then paste the token or the whole link;
      without SMTP: pair as above, joining as <email>
      --token accepts a link, its token, the sign-in code (JWT) a link's page shows, or a device
      token; --jwt uses the JWT flow (POST /auth/magic-link, verify, POST /auth/devices)
  sync-host logout                      remove this device at the host and forget its token
  sync-host pair approve <code>         let a new device showing <code> join your account
  sync-host pair deny <code>            refuse it
  sync-host devices [--json]            list this user's devices (a table on a terminal; JSON
                                        with --json or into a pipe, "thisDevice": true marks this one)
  sync-host devices remove <id>         remove a device (its token stops working at once)
  sync-host projects [--json]           list synced projects (a table on a terminal; JSON with
                                        --json or into a pipe)
  sync-host project add <key> <name>    register a workspace (idempotent); prints the project
  sync-host project remove <key>        stop syncing a workspace
  sync-host project share <key> <email> [--viewer]
      share a project with another user of the host, as editor (or viewer: reads only); needs
      the team tier
  sync-host project members <key>       the project's owner and members (JSON)
  sync-host project unshare <key> <email>
                                        stop sharing it with that user
  sync-host project leave <owner-email>/<key>
                                        stop being a member of a project shared with you
      a shared project is named by its key where that is unambiguous, else <owner-email>/<key>,
      in every command
  sync-host subscription                tier, effective tier, expiry and project limit (JSON)
  sync-host send <projectKey> <to> <json>
      send {"to","payload"} (to: host, broadcast or a device id) in the project's room, exit once
      the relay has it; through the running sync of the project when there is one, else joining
  sync-host listen <projectKey>         print each message for this device as one JSON line
      (through the running sync of the project when there is one)
  sync-host sync <projectKey> <dir> [--encrypt [--passphrase-file F] [--new-passphrase]] [--max-file-bytes N] [--no-perms]
      keep the files of <dir> in step with the project's other devices (text merged as Yjs
      documents; binary files and files over 1 MiB, up to N bytes (1 GiB), as chunks the host
      keeps; links, what .syncignore matches and dot files it does not let through are skipped;
      an edit wins over a delete; versions that cannot merge are kept as
      <name>.sync-conflict-<time>-<device>.<ext> copies; each file's modification time and
      permission bits are kept, the bits neither read nor set with --no-perms); rejoins by
      itself when its connection is taken over; one sync per project and device (a second one
      is refused). --encrypt reads a passphrase from stdin, or from the first line of F (mode
      0600 or 0400), and encrypts end to end (every device must use the same: checked with the
      host first; another one exits with code 3, having done nothing; --new-passphrase records
      this one as the project's too)
  sync-host history <projectKey> [path] [--encrypt [--passphrase-file F]]
      when each file of the project's folder changed, and on which device, from what the host
      keeps (30 days of history by default); through the running sync of the project when
      there is one
  sync-host restore <projectKey> <path>|<folder>/|--all [--at TIME] [--encrypt [--passphrase-file F]]
      bring <path> back as it was at TIME (ISO 8601; default: its last version, a deleted file
      as it was when deleted) as a new edit that reaches every device; a binary file too, when
      the host still holds its chunks; <folder>/ every file under it, --all every file; through
      the running sync of the project when there is one
  sync-host status [<projectKey>] [--json]
      what the running syncs say: connected or not, when last in step, files waiting to go up
      and to be written here, conflict copies, the other devices online (by device id)
  sync-host service install <projectKey> <dir> [--encrypt --passphrase-file F]
      write a systemd user unit running that sync (~/.config/systemd/user/sync-host-<key>.service)
      and print the systemctl commands that start it; elsewhere, print what to run at login
  sync-host service remove <projectKey>  delete that unit

Options: --auth URL (needed when several auth services are stored), --relay URL (default: the
auth service's /.well-known/sync-host), --timeout SECONDS (send: default 10), --at TIME (restore).
Credentials: $SYNC_HOST_CONFIG_DIR/credentials.json (default ~/.config/sync-host), mode 0600.
`;

const exitFailure = 1;
const exitUsage = 2;
/**
 * `sync` ended because this device may no longer join (removed, revoked, its token refused):
 * starting it again cannot help until `login` is run again, so a service unit does not restart
 * it (`RestartPreventExitStatus=2 3`).
 */
const exitDeviceRefused = 3;
const deviceRefusals: ReadonlySet<string> = new Set(['revoked', 'auth_failed', 'wrong_passphrase']);

/** Runs a client subcommand; resolves with the exit code. Errors are one line on stderr. */
export async function runClientCommand(
  argv: string[],
  io: CliIo = processIo,
  env: NodeJS.ProcessEnv = process.env,
  launcher?: string[],
): Promise<number> {
  const [command = '', ...rest] = argv;
  let context: Context;
  try {
    const { values, positionals } = parseCommandLine(rest);
    if (values.help) {
      io.stdout.write(clientUsage);
      return 0;
    }
    context = {
      io,
      flags: values,
      args: positionals,
      store: new CredentialStore(configDir(env)),
      env,
      launcher,
    };
  } catch (err: unknown) {
    io.stderr.write(
      `sync-host ${command}: ${printable(errorLine(err))} (see sync-host ${command} --help)\n`,
    );
    return exitUsage;
  }
  try {
    return await dispatch(command, context);
  } catch (err: unknown) {
    if (err instanceof UsageError) {
      io.stderr.write(
        `sync-host ${command}: ${printable(err.message)} (see sync-host ${command} --help)\n`,
      );
      return exitUsage;
    }
    if (!(err instanceof SyncError)) {
      // A failure no check foresaw: one line with its message, never a stack trace.
      io.stderr.write(`sync-host ${command}: unexpected problem: ${printable(errorLine(err))}\n`);
      return exitFailure;
    }
    // Error messages may come from the auth service or the relay: printed escaped.
    io.stderr.write(`sync-host ${command}: ${printable(errorLine(err, authUrlInUse(context)))}\n`);
    return command === 'sync' && deviceRefusals.has(err.code) ? exitDeviceRefused : exitFailure;
  }
}

function dispatch(command: string, ctx: Context): Promise<number> {
  switch (command) {
    case 'login':
      return login(ctx);
    case 'logout':
      return logout(ctx);
    case 'pair':
      return pairCommand(ctx);
    case 'devices':
      return devicesCommand(ctx);
    case 'projects':
      return projectsCommand(ctx);
    case 'subscription':
      return subscriptionCommand(ctx);
    case 'project':
      return projectCommand(ctx);
    case 'send':
      return send(ctx);
    case 'listen':
      return listen(ctx);
    case 'sync':
      return syncFolder(ctx);
    case 'history':
      return history(ctx);
    case 'restore':
      return restore(ctx);
    case 'status':
      return statusCommand(ctx);
    case 'service':
      return serviceCommand(ctx);
    default:
      throw new UsageError(`unknown client command "${command}"`);
  }
}
