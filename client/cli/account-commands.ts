import {
  type Context,
  expectArgs,
  printJson,
  signedIn,
  UsageError,
  unknownSubcommand,
} from './context.ts';
import { findProject, qualifiedName } from './project-room.ts';
import { printRows } from './table.ts';
import { teamCommand, teamSubcommands } from './team-commands.ts';

/**
 * `devices` (a table on a terminal, this device marked; JSON with `--json` or into a pipe, this
 * device `"thisDevice": true`) and `devices remove <id>`.
 */
export async function devicesCommand(ctx: Context): Promise<number> {
  if (ctx.args[0] === 'remove') {
    ctx.args.shift();
    expectArgs(ctx, 1, '<id>');
    const id = Number(ctx.args[0]);
    if (!Number.isSafeInteger(id) || id <= 0) throw new UsageError('<id> must be a device id');
    const { auth, authUrl, credential } = await signedIn(ctx);
    await auth.deleteDevice(id);
    if (id !== credential.deviceId) {
      ctx.io.stderr.write(`Device ${id} removed.\n`);
      return 0;
    }
    // Its token stopped working: keeping it would fail every later command with a 401.
    ctx.store.remove(authUrl);
    ctx.io.stderr.write(
      `Device ${id} removed: it was this device, which is now signed out (to pair it again: sync-host login --auth ${authUrl}).\n`,
    );
    return 0;
  }
  if (ctx.args[0] !== undefined) throw unknownSubcommand('devices', ctx.args[0], ['remove']);
  const { auth, credential } = await signedIn(ctx);
  const devices = (await auth.devices()).map((device) => ({
    ...device,
    thisDevice: device.id === credential.deviceId,
  }));
  const rows = devices.map((device) => [
    String(device.id),
    device.deviceName,
    device.platform,
    device.lastSeen ?? 'never',
    device.thisDevice ? 'this device' : '',
  ]);
  return printRows(ctx, devices, ['ID', 'NAME', 'PLATFORM', 'LAST SEEN', ''], rows, 'no devices');
}

/** `projects`: the synced projects (a table on a terminal; JSON with `--json` or into a pipe). */
export async function projectsCommand(ctx: Context): Promise<number> {
  expectArgs(ctx, 0, '');
  const projects = await (await signedIn(ctx)).auth.projects();
  const rows = projects.map((project) => [project.projectKey, project.name, project.createdAt]);
  return printRows(ctx, projects, ['KEY', 'NAME', 'CREATED'], rows, 'no projects yet');
}

/** `subscription`: tier, effective tier, expiry and project limit (JSON). */
export async function subscriptionCommand(ctx: Context): Promise<number> {
  expectArgs(ctx, 0, '');
  return printJson(ctx, await (await signedIn(ctx)).auth.subscription());
}

/**
 * `project add <key> <name>` (idempotent, prints the project), `project remove <key>`, and the
 * teams' `project share|members|unshare|leave` (team-commands.ts).
 */
export async function projectCommand(ctx: Context): Promise<number> {
  const sub = ctx.args[0];
  const team = teamSubcommands.find((name) => name === sub);
  if (team !== undefined) {
    ctx.args.shift();
    return teamCommand(ctx, team);
  }
  if (ctx.flags.viewer) throw new UsageError('--viewer goes with project share only');
  if (sub === 'remove') {
    ctx.args.shift();
    expectArgs(ctx, 1, '<key>');
    const { auth } = await signedIn(ctx);
    const project = await findProject(auth, ctx.args[0]!);
    if (project.role !== undefined && project.role !== 'owner') {
      throw new UsageError(
        `"${qualifiedName(project)}" is shared with you: to stop syncing it, sync-host project leave "${qualifiedName(project)}"`,
      );
    }
    await auth.deleteProject(project.id);
    ctx.io.stderr.write(`Project "${ctx.args[0]}" removed.\n`);
    return 0;
  }
  if (sub === undefined)
    throw new UsageError('expected: project add <key> <name> or project remove <key>');
  if (sub !== 'add') {
    throw unknownSubcommand('project', sub, ['add', 'remove', ...teamSubcommands]);
  }
  ctx.args.shift();
  expectArgs(ctx, 2, '<key> <name>');
  const { auth } = await signedIn(ctx);
  const { project } = await auth.registerProject(ctx.args[0]!, ctx.args[1]!);
  return printJson(ctx, project);
}
