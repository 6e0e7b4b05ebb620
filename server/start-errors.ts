import type { DbConfig } from './config/auth-config.ts';
import { ConfigError } from './config/conf-file.ts';
import type { RelayConfig } from './config/relay-config.ts';
import { databaseMistake } from './db/unavailable.ts';
import { ListenError } from './http-listen.ts';

/**
 * What goes wrong while a host starts, told as the user's mistake where it is one: a port in
 * use, a database file or server that refuses, a start stopped by a signal.
 */

/** startHost was stopped by its signal before the host was up; everything opened is closed. */
export class StartAborted extends Error {
  constructor() {
    super('stopped while starting');
    this.name = 'StartAborted';
  }
}

/** `promise`, or StartAborted as soon as `signal` aborts (the promise is left to settle). */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(new StartAborted());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new StartAborted());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A relay port that cannot be opened becomes a ListenError naming the relay.conf key. */
export function relayListenError(err: unknown, config: RelayConfig): unknown {
  const e = err as NodeJS.ErrnoException & { port?: unknown };
  if (typeof e?.code !== 'string' || !['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL'].includes(e.code))
    return err;
  const port = typeof e.port === 'number' ? e.port : config.wsPort;
  const setting =
    port === config.statusPort && port !== config.wsPort
      ? 'status.port in relay.conf'
      : 'ws.port in relay.conf';
  return new ListenError(port, setting, e.code);
}

/** The relay's SQLite buffer cannot be opened: a configuration mistake naming sqlite.path. */
export function bufferOpenError(err: unknown, config: RelayConfig): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^(SQLITE_|E[A-Z]+$)/.test(code)) return err;
  return new ConfigError(
    'relay.conf',
    undefined,
    'sqlite.path',
    `cannot open ${config.sqlitePath} (${code})`,
  );
}

/** The embedded auth database cannot be opened: a configuration mistake naming DB_PATH. */
export function sqliteOpenError(err: unknown, db: DbConfig): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (db.driver !== 'sqlite' || typeof code !== 'string' || !/^(SQLITE_|E[A-Z]+$)/.test(code)) {
    return err;
  }
  return new ConfigError('auth.conf', undefined, 'DB_PATH', `cannot open ${db.path} (${code})`);
}

/** The database refused the credentials or has no such database: a mistake naming the keys. */
export function databaseConfigError(err: unknown, db: DbConfig): unknown {
  const keys = databaseMistake(err);
  if (keys === undefined || db.driver === 'sqlite') return err;
  const server = `${db.driver} at ${db.host}:${db.port}`;
  const problem =
    keys === 'DB_NAME'
      ? `${server} has no database "${db.database}"`
      : `${server} refused the credentials of user "${db.user}"`;
  const detail = err instanceof Error ? ` (${err.message})` : '';
  return new ConfigError('auth.conf', undefined, keys, `${problem}${detail}`);
}
