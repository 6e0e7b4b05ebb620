import { dirname, join } from 'node:path';
import { ConfigError } from '../config/conf-file.ts';
import type { RelayConfig } from '../config/relay-config.ts';
import type { DocumentStore } from './document-store.ts';
import { openSqliteStore } from './sqlite-store.ts';

const dayMs = 24 * 60 * 60 * 1_000;

/** The single-node document store: store.db in relay.db's folder, with relay.conf's bounds. */
export function openLocalStore(config: RelayConfig, now: () => number): DocumentStore {
  const path = join(dirname(config.sqlitePath), 'store.db');
  try {
    return openStoreAt(path, config, now);
  } catch (err: unknown) {
    // Named as the store's file (its folder is sqlite.path's), not as relay.db.
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code !== 'string' || !/^(SQLITE_|E[A-Z]+$)/.test(code)) throw err;
    const problem = `cannot open the document store ${path} (${code})`;
    throw new ConfigError('relay.conf', undefined, 'sqlite.path', problem);
  }
}

function openStoreAt(path: string, config: RelayConfig, now: () => number): DocumentStore {
  return openSqliteStore({
    path,
    bounds: { userMaxBytes: config.storeUserMaxBytes, maxBytes: config.storeMaxBytes },
    history: {
      keepMs: config.storeHistoryDays * dayMs,
      stepMs: config.storeHistoryStepMinutes * 60_000,
    },
    now,
  });
}
