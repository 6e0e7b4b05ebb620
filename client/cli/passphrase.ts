import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Context, UsageError } from './context.ts';
import { readSecret } from './io.ts';

/**
 * The first line of a passphrase file, trimmed as a passphrase typed on stdin is. Refuses
 * (UsageError: exit 2) a file other users may read (mode not 0600 or 0400 on a Unix system),
 * one that is not a regular file, and an empty first line.
 */
export function readPassphraseFile(path: string): string {
  let stat: ReturnType<typeof statSync>;
  let text: string;
  try {
    stat = statSync(path);
    if (!stat.isFile()) throw new UsageError(`--passphrase-file ${path} is not a file`);
    text = readFileSync(path, 'utf8');
  } catch (err: unknown) {
    if (err instanceof UsageError) throw err;
    const why = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new UsageError(`--passphrase-file ${path} cannot be read (${why})`);
  }
  const mode = stat.mode & 0o777;
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw new UsageError(
      `--passphrase-file ${path} may be read by other users (mode 0${mode.toString(8)}); chmod 600 it`,
    );
  }
  const passphrase = (text.split(/\r?\n/, 1)[0] ?? '').trim();
  if (passphrase === '') throw new UsageError(`--passphrase-file ${path} has an empty first line`);
  return passphrase;
}

/**
 * The passphrase options of `sync`, checked before anything else: `--passphrase-file` needs
 * `--encrypt`; the file is read at once. Returns a function resolving with the passphrase, which
 * prompts on stdin only when no file was given (call it once the sync may go on).
 */
export function passphraseSource(ctx: Context): () => Promise<string | undefined> {
  const file = ctx.flags['passphrase-file'];
  if (file !== undefined && !ctx.flags.encrypt) {
    throw new UsageError('--passphrase-file goes with --encrypt');
  }
  if (!ctx.flags.encrypt) return async () => undefined;
  if (file !== undefined) {
    const passphrase = readPassphraseFile(resolve(file));
    return async () => passphrase;
  }
  return async () => {
    const typed = await readSecret(
      ctx.io,
      'Encryption passphrase (the same on every device, not shown): ',
    );
    if (typed === undefined) throw new UsageError('--encrypt needs a passphrase on stdin');
    return typed;
  };
}
