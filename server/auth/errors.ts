/** The contract's HTTP error codes, each with its status. */
export const authErrors = {
  invalid_request: 400,
  unauthorized: 401,
  invalid_token: 401,
  token_expired: 401,
  token_used: 401,
  project_limit: 403,
  device_limit: 403,
  pair_denied: 403,
  not_found: 404,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const;

export type AuthErrorCode = keyof typeof authErrors;

/** An error a client sees as `{"error":{"code","message"}}` with the code's status. */
export class AppError extends Error {
  readonly status: number;

  constructor(
    readonly code: AuthErrorCode,
    message: string,
    /** Seconds, sent as Retry-After (429, 503). */
    readonly retryAfterSeconds?: number,
    /** `cause`: what went wrong underneath, for logs; never sent to the client. */
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'AppError';
    this.status = authErrors[code];
  }
}

export const notFound = (what: string) => new AppError('not_found', `${what} not found`);
export const unauthorized = (why = 'missing or invalid bearer token') =>
  new AppError('unauthorized', why);
/** The database does not answer; `cause` is the driver's error (kept for logs, never sent). */
export const unavailable = (cause?: unknown) =>
  new AppError('unavailable', 'the database is unavailable; try again shortly', 5, { cause });
