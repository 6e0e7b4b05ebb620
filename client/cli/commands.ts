import { closest } from './suggest.ts';

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
  'history',
  'restore',
  'status',
  'service',
]);

/** Whether `argv` (without node and the script) starts with a client subcommand. */
export function isClientCommand(argv: readonly string[]): boolean {
  return clientCommands.has(argv[0] ?? '');
}

/**
 * The client subcommand closest to a mistyped first word (`logn` → `login`), for the top-level
 * command line's "did you mean"; undefined when none is close.
 */
export function closestClientCommand(word: string): string | undefined {
  return closest(word, clientCommands);
}
