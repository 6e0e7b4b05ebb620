/** The client subcommands of `bin/sync-host`, run by `client/cli/main.ts`. */
export const clientCommands: ReadonlySet<string> = new Set([
  'login',
  'logout',
  'pair',
  'devices',
  'projects',
  'project',
  'subscription',
  'send',
  'listen',
  'sync',
  'service',
]);

/** Whether `argv` (without node and the script) starts with a client subcommand. */
export function isClientCommand(argv: readonly string[]): boolean {
  return clientCommands.has(argv[0] ?? '');
}
