import type { E2EKey } from '../e2e-key.ts';
import { folderDocName } from '../folder/document.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { fetchHistory, type HistoryEntry } from '../yjs-history.ts';

/** How long the host's history may take on a first run. */
const historyTimeoutMs = 30_000;

/** The host's entries of the folder document and the position of the last. */
export interface HostHistory {
  entries: HistoryEntry[];
  last: number;
}

/** The host's history for a first run; a line and none when it cannot be had. */
export async function historyFor(
  history: ((key: E2EKey | undefined) => Promise<HostHistory>) | undefined,
  key: E2EKey | undefined,
  problem: (line: string) => void,
): Promise<HostHistory | undefined> {
  if (history === undefined) return undefined;
  try {
    return await history(key);
  } catch (err: unknown) {
    const why = err instanceof Error ? err.message : String(err);
    problem(
      `no history from the host (${why}): a file here that differs from another device's is kept as a conflict copy`,
    );
    return undefined;
  }
}

/**
 * Every entry the host keeps of the folder document, on a connection of its own (closed before
 * sync's own joins), within 30 s.
 */
export async function hostHistory(
  open: () => RelayConnection,
  key: E2EKey | undefined,
): Promise<HostHistory> {
  const connection = open();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 30 s')), historyTimeoutMs);
  });
  try {
    await Promise.race([connection.connect(), late]);
    return await Promise.race([fetchHistory(connection, folderDocName, key), late]);
  } finally {
    clearTimeout(timer);
    if (connection.state !== 'closed') await connection.close();
  }
}
