/** Why a client operation failed; `code` is stable, `message` is one readable sentence. */
export class SyncError extends Error {
  constructor(
    /** A snake_case code: the service's code (`unauthorized`, `auth_failed`...) or the client's own. */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'SyncError';
  }
}

/** An error answer of the auth service: `{"error":{"code","message"}}` with its HTTP status. */
export class AuthServiceError extends SyncError {
  constructor(
    code: string,
    message: string,
    /** HTTP status of the answer (400, 401, 403, 404, 413, 429, 503, 500). */
    readonly status: number,
    /** Seconds from the `Retry-After` header (429, 503), when present. */
    readonly retryAfterSeconds?: number,
  ) {
    super(code, message);
    this.name = 'AuthServiceError';
  }
}

/** An error reported by the relay: an `error` frame or a close code that ends the connection. */
export class RelayError extends SyncError {
  constructor(
    code: string,
    message: string,
    /** The WebSocket close code when the relay closed the connection. */
    readonly closeCode?: number,
  ) {
    super(code, message);
    this.name = 'RelayError';
  }
}

/** Invalid client settings; the message names the setting. */
export class SettingsError extends SyncError {
  constructor(message: string) {
    super('invalid_settings', message);
    this.name = 'SettingsError';
  }
}
