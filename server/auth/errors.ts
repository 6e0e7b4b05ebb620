import { type AuthErrorCode, authErrors } from '../../protocol/auth-codes.ts';

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
