/**
 * The client library's `_sync` envelope: each routed payload carries `_sync: {s, n}`, the
 * sender's session and the message's sequence number, so that a receiver delivers a message
 * sent again after a drop only once, and a cluster node gives NATS a message id that drops a
 * re-sent copy.
 */

/** The payload key that carries the envelope. */
export const envelopeKey = '_sync';

/** The sender's session (random per connection object) and the message's sequence number. */
export interface SyncEnvelope {
  s: string;
  n: number;
}

/** The envelope of a parsed payload; undefined without one (or with a malformed one). */
export function envelopeOf(payload: Record<string, unknown>): SyncEnvelope | undefined {
  const envelope = payload[envelopeKey];
  if (typeof envelope !== 'object' || envelope === null) return undefined;
  const { s, n } = envelope as { s?: unknown; n?: unknown };
  return typeof s === 'string' && typeof n === 'number' ? { s, n } : undefined;
}

/** How the envelope starts in a frame's text, as the client library writes it. */
export const envelopeTextStart = `"${envelopeKey}":{"s":"`;
const envelopeText = /^"_sync":\{"s":"([A-Za-z0-9_-]{1,64})","n":(\d{1,16})\}/;
/** The longest envelope text: the key, a 64-character session and a 16-digit counter. */
export const envelopeTextMaxLength = envelopeTextStart.length + 64 + '","n":'.length + 16 + 1;

/**
 * `<session>.<counter>` of the envelope at the start of `text` (from `envelopeTextStart` on),
 * read without parsing the whole frame: a session of up to 64 URL-safe characters and a counter
 * of up to 16 digits, as written. Undefined when `text` does not start with one.
 */
export function envelopeIdAt(text: string): string | undefined {
  const match = envelopeText.exec(text);
  return match ? `${match[1]}.${match[2]}` : undefined;
}
