import type { RelayConfig } from '../config/relay-config.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore } from './document-store.ts';
import { openPostgresStore } from './postgres-store.ts';

const dayMs = 24 * 60 * 60 * 1_000;

/** The store's URL as it may be logged: without its user's password. */
export function loggableStoreUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    parsed.search = '';
    return parsed.toString();
  } catch {
    return 'postgres://(unreadable URL)';
  }
}

/**
 * A cluster node's document store: the PostgreSQL database of `store.url`, shared by every node;
 * undefined without it (the node answers `store_unavailable`, and says so at start). Connects in
 * the background: until the database answers, appends and catch-ups fail with
 * `store_unavailable` and are asked again by the devices.
 */
export function openClusterStore(
  config: RelayConfig,
  logger: Logger,
  now: () => number,
): DocumentStore | undefined {
  if (config.storeUrl === undefined) {
    logger.warn(
      'cluster node without store.url: it keeps no documents, devices get store_unavailable and sync only with the devices online (set store.url to the PostgreSQL database the nodes share)',
    );
    return undefined;
  }
  const where = loggableStoreUrl(config.storeUrl);
  const store = openPostgresStore({
    url: config.storeUrl,
    bounds: { userMaxBytes: config.storeUserMaxBytes, maxBytes: config.storeMaxBytes },
    history: {
      keepMs: config.storeHistoryDays * dayMs,
      stepMs: config.storeHistoryStepMinutes * 60_000,
    },
    logger,
    now,
  });
  store.ready().then(
    () => logger.info({ store: where }, 'document store ready (PostgreSQL)'),
    (err: unknown) =>
      logger.warn(
        { store: where, err: err instanceof Error ? err.message : String(err) },
        'document store: PostgreSQL cannot be used yet; appends and catch-ups are refused with store_unavailable until it can',
      ),
  );
  return store;
}
