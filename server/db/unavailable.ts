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
