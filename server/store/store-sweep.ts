import type { Logger } from '../log.ts';
import type { DocumentStore } from './document-store.ts';
import type { RoomDirectory } from './room-directory.ts';

/**
 * The document store's periodic work (every 30 s with the relay): forgets the documents of rooms
 * whose project is gone (with a directory to ask), then compacts. Runs one at a time: a call
 * while one runs waits for that one. The last sweep, at the relay's stop (`final`), only
 * compacts: the directory (the auth database, in a headless host) may be closed by then, and a
 * deleted project's documents are forgotten at the first sweep after the next start.
 */
export function createStoreSweep(options: {
  store: DocumentStore;
  rooms: RoomDirectory | undefined;
  logger: Logger;
  now: () => number;
}): (options?: { final?: boolean }) => Promise<void> {
  const { store, rooms, logger, now } = options;
  let running: Promise<void> | undefined;
  let directoryFailing = false;
  /** The relay stops: a directory that fails now is closing, not failing. */
  let stopping = false;

  async function forgetDeletedRooms(): Promise<void> {
    if (rooms === undefined) return;
    const kept = await store.rooms();
    if (kept.length === 0) return;
    let existing: Set<string> | undefined;
    try {
      existing = await rooms.existing(kept);
      directoryFailing = false;
    } catch (err: unknown) {
      // Asked again at the next sweep; nothing is deleted meanwhile.
      if (stopping) return;
      if (!directoryFailing) logger.warn({ err }, 'document store: projects cannot be listed now');
      directoryFailing = true;
      return;
    }
    if (existing === undefined) return;
    for (const room of kept) {
      if (existing.has(room)) continue;
      await store.deleteRoom(room);
      logger.info({ room }, 'document store: documents of a deleted project removed');
    }
  }

  async function sweep(final: boolean): Promise<void> {
    if (!final) await forgetDeletedRooms();
    const report = await store.compact(now());
    if (report.dropped > 0) {
      logger.debug({ dropped: report.dropped, bytes: report.bytes }, 'document store compacted');
    }
  }

  return async (options = {}) => {
    const final = options.final === true;
    stopping ||= final;
    // A sweep under way when the stop comes is waited for; the final one follows it.
    if (final && running !== undefined) await running;
    running ??= sweep(final)
      .catch((err: unknown) => logger.error({ err }, 'document store sweep failed'))
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}
