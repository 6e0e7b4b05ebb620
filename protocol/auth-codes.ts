/**
 * The auth service's error codes, each with its HTTP status: the `code` of an
 * `{"error":{"code","message"}}` answer.
 */
export const authErrors = {
  invalid_request: 400,
  unauthorized: 401,
  invalid_token: 401,
  token_expired: 401,
  token_used: 401,
  project_limit: 403,
  /** Sharing a project needs its owner on the `team` tier. */
  tier_required: 403,
  /** A member who is not the owner changing a project's membership. */
  forbidden: 403,
  device_limit: 403,
  pair_denied: 403,
  not_found: 404,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
  /** Plain HTTP sent to a port that speaks TLS only. */
  tls_required: 400,
} as const;

/** An auth service error answer's `code`. */
export type AuthErrorCode = keyof typeof authErrors;

/** Whether a code read off the wire is one of the auth service's. */
export function isAuthErrorCode(code: string): code is AuthErrorCode {
  return Object.hasOwn(authErrors, code);
}
