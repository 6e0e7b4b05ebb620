import { createHash } from 'node:crypto';
import { join, resolve } from 'node:path';
import type { Project } from '../auth-types.ts';
import { SyncError } from '../errors.ts';
import { defaultReceiveLimits, type ReceiveLimits } from '../folder/receive-budget.ts';
import { type Context, expectArgs, signedIn, UsageError } from './context.ts';
import { devicesOf } from './device-directory.ts';
import { hostHistory } from './first-run-history.ts';
import { runFolderSync } from './folder-run.ts';
import { passphraseSource } from './passphrase.ts';
import { checkPassphrase } from './passphrase-check.ts';
import { printable } from './printable.ts';
import { localName, qualifiedName, roomOf, stopSignal } from './project-room.ts';
import { progressAfterMsFrom } from './sync-progress.ts';
import { reconnectDelaysFrom, startSyncSession } from './sync-session.ts';

/** The local state log of one folder and project, in the credentials' folder. */
export function statePath(configDir: string, authUrl: string, projectKey: string, dir: string) {
  const id = createHash('sha256')
    .update(`${authUrl}\n${projectKey}\n${resolve(dir)}`)
    .digest('hex');
  return join(configDir, 'sync-state', `${id.slice(0, 24)}.log`);
}

/**
 * `sync <projectKey> <dir> [--encrypt [--passphrase-file F]]`: refuses when a sync of the
 * project runs already for this device, else serves its control socket and runs runFolderSync.
 */
export async function syncFolder(ctx: Context): Promise<number> {
  expectArgs(ctx, 2, '<projectKey> <dir>');
  const [projectKey, dir] = ctx.args as [string, string];
  const passphrase = passphraseSource(ctx);
  const maxFileBytes = maxFileBytesOf(ctx.flags['max-file-bytes']);
  const limits = receiveLimitsFrom(ctx.env);
  const { open, authUrl, project, auth } = await roomOf(ctx, projectKey);
  // one name for the folder's local files, whichever name of the project was typed
  const local = localName(project);
  const session = await startSyncSession({
    configDir: ctx.store.dir,
    authUrl,
    projectKey: local,
    folder: dir,
    open,
    onLine: (line) => ctx.io.stderr.write(`${printable(line)}\n`),
    delays: reconnectDelaysFrom(ctx.env),
  });
  try {
    return await runFolderSync({
      io: ctx.io,
      supervisor: session.supervisor,
      dir,
      state: statePath(ctx.store.dir, authUrl, local, dir),
      passphrase: await passphrase(),
      maxFileBytes,
      limits,
      perms: ctx.flags['no-perms'] !== true,
      progressAfterMs: progressAfterMsFrom(ctx.env),
      prefetchIdleMs: prefetchIdleMsFrom(ctx.env),
      stopped: stopSignal(),
      addStatus: session.addStatus,
      serveFolder: session.serveFolder,
      projectKey,
      history: (key) => hostHistory(open, key),
      checkPassphrase: (key) => checkPassphrase(open, key, ctx.flags['new-passphrase'] === true),
      who: devicesOf(auth, project.id),
    });
  } catch (err: unknown) {
    throw await membershipEnded(ctx, project, dir, err);
  } finally {
    await session.close();
  }
}

/**
 * A shared project's sync refused by the relay (`revoked`, `auth_failed`): when the project is
 * no longer shared with this user (removed, left, or deleted by its owner), one line that says
 * so instead of the relay's; any other error as it was.
 */
async function membershipEnded(
  ctx: Context,
  project: Project,
  dir: string,
  err: unknown,
): Promise<unknown> {
  const refused =
    err instanceof SyncError && (err.code === 'revoked' || err.code === 'auth_failed');
  if (!refused || project.role === undefined || project.role === 'owner') return err;
  const listed = await (await signedIn(ctx)).auth.projects().catch(() => undefined);
  if (listed === undefined || listed.some((p) => p.id === project.id)) return err;
  return new SyncError(
    'not_found',
    `"${qualifiedName(project)}" is no longer shared with you (you were removed, or its owner deleted it): sync stopped; the files stay in ${dir}`,
  );
}

/**
 * Test-only: how long a prefetch no notice touched is kept, in ms (not documented for users:
 * 5 minutes).
 */
export const prefetchIdleVariable = 'SYNC_HOST_TEST_PREFETCH_IDLE_MS';

function prefetchIdleMsFrom(env: NodeJS.ProcessEnv): number | undefined {
  const ms = Number(env[prefetchIdleVariable]);
  return env[prefetchIdleVariable] && Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/** How many new files from other devices the folder takes a minute (100,000 when absent). */
export const maxNewFilesVariable = 'SYNC_HOST_MAX_NEW_FILES';

function receiveLimitsFrom(env: NodeJS.ProcessEnv): ReceiveLimits | undefined {
  const value = env[maxNewFilesVariable];
  if (value === undefined || value === '') return undefined;
  const files = wholeNumberOf(
    value,
    `${maxNewFilesVariable} takes a whole number of files, such as 5000`,
  );
  return { ...defaultReceiveLimits, filesPerMinute: files };
}

/** `--max-file-bytes N`: a whole number of bytes, at least 1 (1 GiB when absent). */
function maxFileBytesOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return wholeNumberOf(value, '--max-file-bytes takes a whole number of bytes, such as 1073741824');
}

/** `value` as a whole number of at least 1, or a usage error that says `mistake`. */
function wholeNumberOf(value: string, mistake: string): number {
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number) || number < 1) {
    throw new UsageError(mistake);
  }
  return number;
}
