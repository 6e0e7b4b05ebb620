import { type AuthErrorCode, isAuthErrorCode } from '../protocol/auth-codes.ts';
import { type RelayErrorCode, relayErrors } from '../protocol/relay-codes.ts';

/**
 * The codes the client raises itself, beside the auth service's and the relay's: settings and
 * options refused, transport failures, the CLI's own (control socket, credentials, trust).
 */
export const clientErrorCodes = [
  'aborted',
  'already_running',
  'bad_credentials',
  'chunk_corrupt',
  'closed',
  'decrypt_failed',
  'encrypted',
  'fingerprint_mismatch',
  'fingerprint_required',
  'folder_unusable',
  'http_error',
  'invalid_answer',
  'invalid_frame',
  'invalid_json',
  'invalid_message',
  'invalid_options',
  'invalid_passphrase',
  'invalid_payload',
  'invalid_response',
  'invalid_settings',
  'invalid_url',
  'message_too_big',
  'no_token',
  'no_webcrypto',
  'no_websocket',
  'not_encrypted',
  'not_found',
  'not_https',
  'not_running',
  'not_signed_in',
  'not_trusted',
  'path_too_long',
  'queue_full',
  'receive_limit',
  'relay_error',
  'replaced',
  'revoked',
  'send_failed',
  'sync_disabled',
  'sync_stopped',
  'timeout',
  'too_big',
  'unreachable',
  'unsafe_socket_folder',
  'unsupported_data',
  'wrong_passphrase',
  'wrong_service',
] as const;

/** A code the client raises itself. */
export type ClientErrorCode = (typeof clientErrorCodes)[number];

/** Every `SyncError.code`: the client's own, the auth service's and the relay's. */
export type SyncErrorCode = ClientErrorCode | AuthErrorCode | RelayErrorCode;

const syncErrorCodes: ReadonlySet<string> = new Set<string>([
  ...clientErrorCodes,
  ...Object.keys(relayErrors),
]);

/** Whether a code read off the wire (a relay frame, a control answer) is one the client knows. */
export function isSyncErrorCode(code: string): code is SyncErrorCode {
  return syncErrorCodes.has(code) || isAuthErrorCode(code);
}

/** Why a client operation failed; `code` is stable, `message` is one readable sentence. */
export class SyncError extends Error {
  constructor(
    /** A snake_case code: the service's code (`unauthorized`, `auth_failed`...) or the client's own. */
    readonly code: SyncErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'SyncError';
  }
}

/** An error answer of the auth service: `{"error":{"code","message"}}` with its HTTP status. */
export class AuthServiceError extends SyncError {
  constructor(
    code: AuthErrorCode | 'http_error',
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
    code: SyncErrorCode,
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

/**
 * Why nothing answered: `refused` (the address resolves and a machine is there, but nothing
 * listens on the port: the host is not running), `not_found` (the name does not resolve),
 * `no_route` (no way to that address: a wrong or absent machine), `timeout` (no answer at all),
 * `not_tls` (an https:// URL whose port answers in plain HTTP: a host with TLS=off, or the
 * relay's status port), `other`.
 */
export type UnreachableReason =
  | 'refused'
  | 'not_found'
  | 'no_route'
  | 'timeout'
  | 'not_tls'
  | 'other';

/** The auth service could not be reached (code `unreachable`); `reason` tells the cases apart. */
export class UnreachableError extends SyncError {
  constructor(
    message: string,
    readonly reason: UnreachableReason,
  ) {
    super('unreachable', message);
    this.name = 'UnreachableError';
  }
}

/**
 * The URL given as the auth service answers as another part of the host (code `wrong_service`):
 * the relay's WebSocket port (`relay`, an HTTP 426) or its status port (`relay_status`, a
 * `/health` with room counts). `authUrl` is where the auth service is by default (port 8445 of
 * the same host).
 */
export class WrongServiceError extends SyncError {
  constructor(
    /** The URL that was given as the auth service's. */
    readonly givenUrl: string,
    readonly service: 'relay' | 'relay_status',
    /** Where the auth service is by default. */
    readonly authUrl: string,
  ) {
    super(
      'wrong_service',
      `${givenUrl} is ${wrongServiceLabels[service]}, not the auth service; the auth service is on port 8445 by default: ${authUrl}`,
    );
    this.name = 'WrongServiceError';
  }
}

/** What each port that is not the auth service is called in messages. */
export const wrongServiceLabels = {
  relay: 'the relay (WebSocket) port',
  relay_status: "the relay's status port",
} as const;
