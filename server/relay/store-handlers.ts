import type { RelayConfig } from '../config/relay-config.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore } from '../store/document-store.ts';
import { openLocalStore } from '../store/local-store.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import { createStoreSweep } from '../store/store-sweep.ts';
import { type ChunkFrames, createChunkFrames } from './chunk-frames.ts';
import { createDocumentFrames, type DocumentFrames } from './document-frames.ts';
import type { RelayMetrics } from './metrics.ts';

/** The relay's store and what answers from it: the document and chunk frames, the sweep. */
export interface StoreHandlers {
  store: DocumentStore | undefined;
  documents: DocumentFrames;
  chunks: ChunkFrames;
  /** The store's sweep (deleted projects, compaction, unused chunks); resolves at once without one. */
  sweep: (options?: { final?: boolean }) => Promise<void>;
  /** The store's lines of `/metrics`. */
  metrics: () => string;
}

/**
 * Opens the relay's store (see `RelayOptions.store`: given, none, or store.db beside relay.db for
 * the in-process broker) and the handlers of its frames. Throws, after calling `failed`, when
 * store.db cannot be opened.
 */
export function openStoreHandlers(
  options: {
    config: RelayConfig;
    store: DocumentStore | null | undefined;
    /** A broker was given (a cluster): no store.db then. */
    clustered: boolean;
    rooms: RoomDirectory | undefined;
  },
  context: { metrics: RelayMetrics; logger: Logger; now: () => number; failed: () => void },
): StoreHandlers {
  const { config } = options;
  const { metrics, logger, now } = context;
  let store: DocumentStore | undefined;
  try {
    store =
      options.store === null
        ? undefined
        : (options.store ?? (options.clustered ? undefined : openLocalStore(config, now)));
  } catch (err: unknown) {
    context.failed();
    throw err;
  }
  const documents = createDocumentFrames({
    store,
    metrics,
    logger,
    maxMessageBytes: config.messageMaxBytes,
    maxQueuedBytes: config.maxQueuedBytes,
    now,
  });
  const chunks = createChunkFrames({
    store: store?.chunks,
    metrics,
    logger,
    now,
    maxQueuedBytes: config.maxQueuedBytes,
  });
  const sweep = store
    ? createStoreSweep({ store, rooms: options.rooms, logger, now })
    : () => Promise.resolve();
  return { store, documents, chunks, sweep, metrics: () => documents.metrics() + chunks.metrics() };
}
