import type { E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import { folderDocName } from '../folder/document.ts';
import type { FolderSync } from '../folder/folder-sync.ts';
import { fetchHistory } from '../yjs-history.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';
import type { ControlRequest } from './control-protocol.ts';
import type { DeviceDirectory } from './device-directory.ts';
import { historyOutput, type Output, putBack, restoreOutput } from './folder-history.ts';

/** A running sync as its control socket's answers see it. */
export interface RunningSync {
  supervisor: ConnectionSupervisor;
  key: E2EKey | undefined;
  folder: FolderSync;
  provider: { flush(): Promise<void> };
  projectKey: string | undefined;
  held: (ids: string[]) => Promise<Set<string>>;
}

/**
 * `history` or `restore` asked of this sync through its control socket: the host's history of
 * the folder read on this sync's connection (the device's one in the room); a restore is an
 * edit of the folder here, written here and sent like any other.
 */
export async function folderRequest(
  request: Extract<ControlRequest, { op: 'history' | 'restore' }>,
  running: RunningSync,
): Promise<Output> {
  const { supervisor, key, folder, provider, held } = running;
  const projectKey = running.projectKey ?? 'this project';
  if (supervisor.state !== 'joined') {
    throw new SyncError(
      'not_joined',
      'the running sync is not connected to the host now; try again once it is',
    );
  }
  const connection = supervisor.connection;
  const kept = { connection, key, held, ...(await fetchHistory(connection, folderDocName, key)) };
  if (request.op === 'history') return historyOutput(kept, projectKey, request.path);
  return restoreOutput(kept, projectKey, request.path, request.at, async (contents) => {
    const device = String(connection.device);
    const changed = contents.filter(([path, content]) =>
      putBack(folder.shared, path, content, device),
    );
    if (changed.length > 0) await provider.flush();
    return changed.map(([path]) => path);
  });
}

/**
 * What the control socket's `status` adds for a running sync: whether it is in sync (and when it
 * last was), who the devices are, the folder's counts and what waits to go up (on a viewer's
 * device nothing goes up: the files changed here are listed as not sent).
 */
export function statusFields(
  running: Pick<RunningSync, 'supervisor' | 'folder'>,
  sync: { inSync: boolean; lastInSync: string | null },
  who: DeviceDirectory | undefined,
): Record<string, unknown> {
  const { supervisor, folder } = running;
  const { blobsUp, ...fields } = folder.folderStatus();
  const sent = folder.unconfirmed.summary;
  return {
    inSync: sync.inSync,
    lastInSync: sync.inSync ? new Date().toISOString() : sync.lastInSync,
    ...(who && { who: Object.fromEntries(who.known()) }),
    ...(supervisor.connection.readOnly
      ? { waitingUp: { files: 0, bytes: 0 }, viewer: true, notSent: folder.unconfirmed.paths() }
      : {
          waitingUp: { files: sent.files + blobsUp.files, bytes: sent.bytes + blobsUp.bytes },
        }),
    ...fields,
  };
}
