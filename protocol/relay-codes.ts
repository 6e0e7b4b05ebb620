/**
 * The relay's codes, spoken by the relay and its clients alike: WebSocket close codes with the
 * reason sent beside them, and the `code` of `{"type":"error"}` frames.
 */

/** A WebSocket close code with the reason sent beside it (a reason is at most 123 bytes). */
export interface CloseEvent {
  readonly code: number;
  readonly reason: string;
}

/** The relay is shutting down (or restarting): reconnect later. */
export const GoingAway = {
  code: 1001,
  reason: 'relay shutting down',
} as const satisfies CloseEvent;

/**
 * A binary frame other than a `chunk-put` in the binary form (a malformed header, another type,
 * anything else): every other frame of the protocol is JSON text.
 */
export const UnsupportedData = {
  code: 1003,
  reason: 'binary frames other than chunk-put are not accepted',
} as const satisfies CloseEvent;

/** A frame over `message.maxBytes` (sent by `ws` itself through `maxPayload`). */
export const MessageTooBig = {
  code: 1009,
  reason: 'message too big',
} as const satisfies CloseEvent;

/** The receiver does not read its socket fast enough; its messages are buffered instead. */
export const TryAgainLater = {
  code: 1013,
  reason: 'receiver too slow',
} as const satisfies CloseEvent;

/**
 * The relay cannot take the join now (a cluster node cut off from NATS, or that could not register
 * the join in it): nothing of the join was kept; the client retries.
 */
export const JoinsUnavailable = {
  code: 1013,
  reason: 'relay cannot take joins now, retry',
} as const satisfies CloseEvent;

/**
 * Messages this connection sent were not stored (a cluster node that lost NATS before NATS took
 * them): no `pong` confirms them; the client reconnects and sends what was not confirmed again.
 */
export const NotStored = {
  code: 1013,
  reason: 'messages not stored, send them again',
} as const satisfies CloseEvent;

/** Join refused: bad token, secret mismatch, device not the token's, room of another user. */
export const AuthFailed = { code: 4001, reason: 'auth failed' } as const satisfies CloseEvent;

/** The device was deleted through the auth service. */
export const Revoked = { code: 4003, reason: 'device revoked' } as const satisfies CloseEvent;

/** No valid join within the join timeout (10 s). */
export const JoinTimeout = { code: 4008, reason: 'join timeout' } as const satisfies CloseEvent;

/** The same device joined the same room again on a newer connection. */
export const Replaced = {
  code: 4009,
  reason: 'replaced by a newer connection',
} as const satisfies CloseEvent;

/**
 * The `code` of a `{"type":"error","code","message"}` frame, with what it means. Every one but
 * `auth_failed` (followed by close 4001) keeps the connection open.
 */
export const relayErrors = {
  invalid_json: 'the frame is not JSON',
  invalid_message: 'not an object, unknown type, or a wrong or missing field',
  not_joined: 'a routed message or leave before a join',
  already_joined: 'a join on a connection that is already in a room',
  unknown_target: 'to names nobody in the room, the sender itself, or host when the sender is host',
  rate_limited: 'the connection sent faster than its token bucket allows: the frame was dropped',
  room_full: 'the room already has room.maxDevices devices present',
  auth_failed: 'the join was refused; close 4001 follows',
  store_full: 'an append past store.userMaxBytes or store.maxBytes: nothing was stored',
  store_unavailable: 'this relay keeps no documents: append and catchup are not served',
  chunk_missing: 'a chunk-get of an id the host does not hold under that kc',
  forbidden: 'an append or chunk-put from a viewer of a shared project: nothing was stored',
} as const;

/** A relay error frame's `code`. */
export type RelayErrorCode = keyof typeof relayErrors;

/** Whether a code read off the wire is one of the relay's error frame codes. */
export function isRelayErrorCode(code: string): code is RelayErrorCode {
  return Object.hasOwn(relayErrors, code);
}
