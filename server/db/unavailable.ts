const connectionCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_QUERY_INTERRUPTED',
  'ER_ACCESS_DENIED_ERROR',
  'ER_BAD_DB_ERROR',
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_READONLY',
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_CANTOPEN',
  'SQLITE_CORRUPT',
  'SQLITE_NOTADB',
  // sql.js writes the database image with node:fs: a full, read-only or failing disk.
  'ENOSPC',
  'EDQUOT',
  'EROFS',
  'EIO',
  '28P01',
  '3D000',
  '53300',
  '57P01',
  '57P02',
  '57P03',
]);

const connectionMessages =
  /connection terminated|terminating connection|timeout exceeded when trying to connect|pool is closed|can't add new command when connection is in closed state|connection is closed|client has encountered a connection error|server closed the connection|database unavailable|query read timeout|disk i\/o error|database or disk is full|readonly database/i;

/**
 * Whether an error means "the database cannot be reached or written right now" (answer 503
 * `unavailable`, recover when it is back) rather than a bug (500).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message, errno } = err as { code?: unknown; message?: unknown; errno?: unknown };
  if (
    typeof code === 'string' &&
    (connectionCodes.has(code) || code.startsWith('08') || code.startsWith('SQLITE_IOERR'))
  ) {
    return true;
  }
  if (errno === 1927 || errno === 2013 || errno === 2006) return true;
  return typeof message === 'string' && connectionMessages.test(message);
}

/** Which configuration keys a database's refusal points at. */
export type DatabaseMistake = 'DB_USER/DB_PASS' | 'DB_NAME';

const mistakeCodes: Record<string, DatabaseMistake> = {
  // PostgreSQL: wrong password; unknown role or refused by pg_hba; no such database.
  '28P01': 'DB_USER/DB_PASS',
  '28000': 'DB_USER/DB_PASS',
  '3D000': 'DB_NAME',
  // MySQL and MariaDB.
  ER_ACCESS_DENIED_ERROR: 'DB_USER/DB_PASS',
  ER_ACCESS_DENIED_NO_PASSWORD_ERROR: 'DB_USER/DB_PASS',
  ER_DBACCESS_DENIED_ERROR: 'DB_USER/DB_PASS',
  ER_BAD_DB_ERROR: 'DB_NAME',
};

/**
 * Whether an error is the database server refusing the configured credentials or naming a
 * database it does not have: a configuration mistake (no point retrying), unlike a server that
 * cannot be reached yet. Returns the keys to fix, or undefined.
 */
export function databaseMistake(err: unknown): DatabaseMistake | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && code in mistakeCodes) return mistakeCodes[code];
  // pg asked for a password by the server while DB_PASS is empty: a plain Error, no code.
  if (typeof message === 'string' && /client password must be a string/i.test(message))
    return 'DB_USER/DB_PASS';
  return undefined;
}
