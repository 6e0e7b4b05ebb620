import type { Logger } from '../log.ts';
import type { DocumentStore } from './document-store.ts';
import type { RoomDirectory } from './room-directory.ts';

/**
 * The document store's periodic work (every 30 s with the relay): forgets the documents of rooms
 * whose project is gone (with a directory to ask), then compacts. Runs one at a time: a call
 * while one runs waits for that one.
 */
export function createStoreSweep(options: {
  store: DocumentStore;
  rooms: RoomDirectory | undefined;
  logger: Logger;
  now: () => number;
}): () => Promise<void> {
  const { store, rooms, logger, now } = options;
  let running: Promise<void> | undefined;
  let directoryFailing = false;

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

  async function sweep(): Promise<void> {
    await forgetDeletedRooms();
    const report = await store.compact(now());
    if (report.dropped > 0) {
      logger.debug({ dropped: report.dropped, bytes: report.bytes }, 'document store compacted');
    }
  }

  return () => {
    running ??= sweep()
      .catch((err: unknown) => logger.error({ err }, 'document store sweep failed'))
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}
