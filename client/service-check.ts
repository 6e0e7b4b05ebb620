import { UnreachableError, type UnreachableReason, WrongServiceError } from './errors.ts';

/** The auth service's port when the host's configuration does not say otherwise. */
export const defaultAuthPort = 8445;

const reasons: Record<string, UnreachableReason> = {
  ECONNREFUSED: 'refused',
  ENOTFOUND: 'not_found',
  EAI_AGAIN: 'not_found',
  EAI_NONAME: 'not_found',
  EHOSTUNREACH: 'no_route',
  ENETUNREACH: 'no_route',
  EHOSTDOWN: 'no_route',
  ETIMEDOUT: 'timeout',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  // OpenSSL reading a plain-HTTP answer as a TLS record.
  ERR_SSL_WRONG_VERSION_NUMBER: 'not_tls',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'not_tls',
};

const why: Record<UnreachableReason, string> = {
  refused: 'nothing listens there (connection refused)',
  not_found: 'the host name does not resolve',
  no_route: 'no route to that address',
  timeout: 'no answer (timed out)',
  not_tls: 'that port answers without TLS',
  other: 'the connection failed',
};

/** The error code of a failed `fetch` (its cause, or the first of several addresses tried). */
function errorCode(err: unknown): string | undefined {
  const cause = err instanceof Error ? (err.cause ?? err) : err;
  if (typeof cause !== 'object' || cause === null) return undefined;
  if ('code' in cause && typeof cause.code === 'string') return cause.code;
  if (cause instanceof AggregateError) return errorCode(cause.errors[0]);
  if (cause instanceof Error && cause.name === 'TimeoutError') return 'ETIMEDOUT';
  return undefined;
}

/**
 * A failed `fetch` of the auth service as an UnreachableError whose reason tells "nothing
 * listens at that address" (the host is not running) from "that address leads nowhere".
 */
export function unreachable(authUrl: string, err: unknown): UnreachableError {
  const code = errorCode(err);
  const reason = (code === undefined ? undefined : reasons[code]) ?? 'other';
  const cause = err instanceof Error ? (err.cause ?? err) : err;
  const detail =
    reason === 'other' ? (cause instanceof Error ? cause.message : String(cause)) : why[reason];
  const suffix = code !== undefined && reason !== 'refused' ? ` (${code})` : '';
  return new UnreachableError(
    `cannot reach the auth service at ${authUrl}: ${detail}${suffix}`,
    reason,
  );
}

/** `http://host:8445` for the host of `url`, keeping its scheme. */
function authUrlOnDefaultPort(url: URL): string {
  return `${url.protocol}//${url.hostname}:${defaultAuthPort}`;
}

/**
 * Whether an answer that no auth service gives came from another port of the host: the relay's
 * WebSocket port answers every HTTP request with 426 Upgrade Required; its status port answers
 * `GET /health` with room counts (asked here when `answer` alone does not tell). Resolves with
 * the WrongServiceError to throw, or undefined when the answer is from something else.
 */
export async function wrongService(
  authUrl: string,
  answer: Response,
  doFetch: typeof fetch,
): Promise<WrongServiceError | undefined> {
  const url = new URL(authUrl);
  const suggested = authUrlOnDefaultPort(url);
  const wrong = (service: 'relay' | 'relay_status') =>
    new WrongServiceError(authUrl, service, suggested);
  if (answer.status === 426 || answer.headers.get('upgrade')?.toLowerCase() === 'websocket') {
    return wrong('relay');
  }
  let health: unknown;
  try {
    const res = await doFetch(new URL('/health', url.origin), {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(5_000),
    });
    if (res.status === 426) return wrong('relay');
    health = await res.json();
  } catch (err: unknown) {
    // Not JSON, or gone: nothing more to tell than the first answer did.
    if (err instanceof Error) return undefined;
    throw err;
  }
  const rooms =
    typeof health === 'object' && health !== null && 'rooms' in health && typeof health.rooms;
  return rooms === 'number' ? wrong('relay_status') : undefined;
}

/** What proxies answer when the program behind them does not (nginx: 502 Bad Gateway, 504). */
const proxyAnswers: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * The message for an error answer without the auth service's `{error}` body: from a proxy in
 * front of a host that is not running (502, 503, 504), or from a server that is not a sync-host
 * (a 4xx of a router's or NAS's own web page): each said as such, with what to check.
 */
export function answerWithoutErrorBody(authUrl: string, request: string, status: number): string {
  const answered = `${authUrl} answered ${request} with HTTP ${status} and no error body`;
  if (proxyAnswers.has(status))
    return `${answered}: a proxy in front of the host answers so while the host is not running`;
  if (status >= 400 && status < 500)
    return `${answered}: is that a sync-host auth service? check the address and port (the host prints its auth URL at start)`;
  return answered;
}
