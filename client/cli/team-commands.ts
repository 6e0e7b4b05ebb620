import { type Context, expectArgs, printJson, signedIn, UsageError } from './context.ts';
import { findProject, qualifiedName } from './project-room.ts';

/** The project subcommands of teams, each named after its first word. */
export const teamSubcommands = ['share', 'members', 'unshare', 'leave'] as const;

/**
 * `project share <key> <email> [--viewer]` (editor unless `--viewer`; prints the member),
 * `project members <key>` (the owner and the members, JSON), `project unshare <key> <email>`
 * and `project leave <owner-email>/<key>`. A shared project is named by its key where that is
 * unambiguous, else as `<owner-email>/<key>`.
 */
export async function teamCommand(ctx: Context, sub: (typeof teamSubcommands)[number]) {
  if (sub === 'share') {
    expectArgs(ctx, 2, '<key> <email>');
    const [name, email] = ctx.args as [string, string];
    const { auth } = await signedIn(ctx);
    const project = await findProject(auth, name);
    const member = await auth.share(project.id, email, ctx.flags.viewer ? 'viewer' : 'editor');
    return printJson(ctx, member);
  }
  if (ctx.flags.viewer) throw new UsageError('--viewer goes with project share only');
  if (sub === 'members') {
    expectArgs(ctx, 1, '<key>');
    const { auth } = await signedIn(ctx);
    return printJson(ctx, await auth.members((await findProject(auth, ctx.args[0]!)).id));
  }
  if (sub === 'unshare') {
    expectArgs(ctx, 2, '<key> <email>');
    const [name, email] = ctx.args as [string, string];
    const { auth } = await signedIn(ctx);
    const project = await findProject(auth, name);
    const wanted = email.trim().toLowerCase();
    const member = (await auth.members(project.id)).members.find((m) => m.email === wanted);
    if (member === undefined) {
      throw new UsageError(`${wanted} is not a member of "${qualifiedName(project)}"`);
    }
    await auth.removeMember(project.id, member.userId);
    ctx.io.stderr.write(`"${qualifiedName(project)}" is no longer shared with ${wanted}.\n`);
    return 0;
  }
  expectArgs(ctx, 1, '<owner-email>/<key>');
  const { auth, credential } = await signedIn(ctx);
  const project = await findProject(auth, ctx.args[0]!);
  if (project.role === 'owner' || project.role === undefined) {
    throw new UsageError(
      `"${ctx.args[0]}" is your own project: to stop sharing it, sync-host project unshare <key> <email>; to delete it, sync-host project remove <key>`,
    );
  }
  await auth.removeMember(project.id, credential.userId);
  ctx.io.stderr.write(
    `You left "${qualifiedName(project)}"; the files of your sync of it stay where they are.\n`,
  );
  return 0;
}
