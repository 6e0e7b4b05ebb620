import { docKeyOf } from '../doc-key.ts';
import { deriveE2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import { folderDocName } from '../folder/document.ts';
import { cursorAfter, documentAt, fetchHistory } from '../yjs-history.ts';
import { YjsProvider } from '../yjs-provider.ts';
import { type Context, signedIn, UsageError } from './context.ts';
import { requestControl } from './control-client.ts';
import { controlSocketPath } from './control-path.ts';
import type { ControlRequest } from './control-protocol.ts';
import {
  type FolderHistory,
  historyOutput,
  type Output,
  putBack,
  restoreOutput,
} from './folder-history.ts';
import { passphraseSource } from './passphrase.ts';
import { printable } from './printable.ts';
import { findProject, localNameOf, projectDevices, roomOf } from './project-room.ts';

/** How long joining and the catch-up may take. */
const timeoutMs = 30_000;

/**
 * Asks the running `sync` of the project on this device (when there is one) to do `request` on
 * its connection, which is this device's in the room; undefined when none runs.
 */
async function throughRunningSync(
  ctx: Context,
  projectKey: string,
  request: Extract<ControlRequest, { op: 'history' | 'restore' }>,
): Promise<Output | undefined> {
  const { authUrl } = await signedIn(ctx);
  const answer = await requestControl(
    controlSocketPath(ctx.store.dir, authUrl, await localNameOf(ctx, projectKey)),
    request,
    2 * timeoutMs,
    'the running sync did not answer',
  );
  if (answer === undefined) return undefined;
  if (!answer.ok || answer.output === undefined) {
    throw new SyncError('invalid_response', 'the running sync answered without what was asked');
  }
  return answer.output;
}

/**
 * Joins the project's room as this device, reads every entry the host keeps of the folder
 * document, runs `use`, and leaves (when no `sync` of the project runs on this device).
 */
async function withFolderHistory<T>(
  ctx: Context,
  projectKey: string,
  use: (history: FolderHistory) => Promise<T>,
): Promise<T> {
  const passphrase = passphraseSource(ctx);
  const { open } = await roomOf(ctx, projectKey);
  const connection = open();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new SyncError('timeout', `no answer from the host within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([connection.connect(), late]);
    const typed = await passphrase();
    const key = typed === undefined ? undefined : await deriveE2EKey(typed, connection.room);
    const kept = await Promise.race([fetchHistory(connection, folderDocName, key), late]);
    return await Promise.race([use({ connection, key, ...kept }), late]);
  } finally {
    clearTimeout(timer);
    if (connection.state !== 'closed') await connection.close();
  }
}

function print(ctx: Context, output: Output): number {
  ctx.io.stdout.write(output.stdout);
  ctx.io.stderr.write(output.stderr);
  return 0;
}

/**
 * `history <projectKey> [path] [--encrypt [--passphrase-file F]]`: when each file changed;
 * through the running sync of the project when there is one (with its passphrase).
 */
export async function history(ctx: Context): Promise<number> {
  if (ctx.args.length < 1) throw new UsageError('missing arguments: expected <projectKey> [path]');
  if (ctx.args.length > 2) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  const [projectKey, path] = ctx.args as [string, string | undefined];
  const names = await deviceNames(ctx, projectKey);
  const request = { op: 'history' as const, ...(path === undefined ? {} : { path }) };
  const running = await throughRunningSync(ctx, projectKey, request);
  if (running !== undefined) return print(ctx, attributed(running, names));
  return withFolderHistory(ctx, projectKey, async (kept) =>
    print(ctx, attributed(historyOutput(kept, projectKey, path), names)),
  );
}

/**
 * Who each device of the project is, `<e-mail>, <device name>` by device id: its owner's and its
 * members' devices (a deleted device is not among them). Empty when the auth service does not say.
 */
async function deviceNames(ctx: Context, projectKey: string): Promise<Map<string, string>> {
  const { auth } = await signedIn(ctx);
  const project = await findProject(auth, projectKey);
  const names = new Map<string, string>();
  for (const [id, who] of await projectDevices(auth, project.id)) {
    names.set(id, `${who.email}, ${who.deviceName}`);
  }
  return names;
}

/** `history`'s lines with each change's device named: `device <id> (<e-mail>, <device name>)`. */
function attributed(output: Output, names: ReadonlyMap<string, string>): Output {
  if (names.size === 0) return output;
  const stdout = output.stdout.replace(
    /^(\S+ {2}device )(\S+)( {2})/gm,
    (whole, head, id, tail) => {
      const who = names.get(id);
      return who === undefined ? whole : `${head}${id} (${printable(who)})${tail}`;
    },
  );
  return { ...output, stdout };
}

/**
 * `restore <projectKey> <path> [--at <ISO time>] [--encrypt [--passphrase-file F]]`: brings the
 * file back as it was then (now by default: a deleted file as it was when deleted), as a new
 * edit that the host stores and every device receives. A file kept as chunks comes back as a
 * new version naming the same chunks, once the host says it still holds every one of them.
 * Through the running sync of the project when there is one: its folder takes the edit.
 */
export async function restore(ctx: Context): Promise<number> {
  const all = ctx.flags.all === true;
  const wanted = all ? 1 : 2;
  if (ctx.args.length < wanted) {
    throw new UsageError('missing arguments: expected <projectKey> <path>, or <projectKey> --all');
  }
  if (ctx.args.length > wanted) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  const [projectKey, named] = ctx.args as [string, string | undefined];
  const path = all ? '' : named!;
  const atFlag = ctx.flags.at;
  const at = atFlag === undefined ? undefined : Date.parse(atFlag);
  if (at !== undefined && !Number.isFinite(at)) {
    throw new UsageError('--at takes a time such as 2026-11-26T16:40:00Z');
  }
  const request = { op: 'restore' as const, path, ...(at === undefined ? {} : { at }) };
  const running = await throughRunningSync(ctx, projectKey, request);
  if (running !== undefined) return print(ctx, running);
  return withFolderHistory(ctx, projectKey, async (kept) => {
    const { connection, key, entries, last } = kept;
    const output = await restoreOutput(kept, projectKey, path, at, async (contents) => {
      const doc = documentAt(entries);
      const store = cursorAfter(entries, last, docKeyOf(folderDocName, key));
      const provider = new YjsProvider({ connection, doc, name: folderDocName, store }, key);
      try {
        await provider.whenSynced();
        const device = String(connection.device);
        const changed = contents.filter(([each, content]) => putBack(doc, each, content, device));
        if (changed.length > 0) await provider.flush();
        return changed.map(([each]) => each);
      } finally {
        provider.destroy();
      }
    });
    return print(ctx, output);
  });
}
