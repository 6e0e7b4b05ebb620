import { envelopeKey, envelopeOf } from '../protocol/sync-envelope.ts';
import { SyncError } from './errors.ts';

export { envelopeKey } from '../protocol/sync-envelope.ts';

/** Receivers remember this many sender sessions; the least recently advanced is forgotten first. */
export const maxRememberedSessions = 1024;

function randomSession(): string {
  const bytes = new Uint8Array(8);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Exactly-once delivery of messages sent again after a drop. The sender adds
 * `_sync: {s, n}` (its session, the message's sequence number) to each payload; a receiver
 * keeps the highest `n` per sender session, drops a copy it already has and removes the key
 * before handing the payload on.
 */
export class DedupeEnvelope {
  /** This sender's session, fixed for the life of the connection object (across reconnects). */
  readonly session = randomSession();
  /** Highest sequence number seen per sender session (`<from> <session>`), oldest first. */
  private readonly seen = new Map<string, number>();
  private readonly maxSessions: number;

  constructor(maxSessions = maxRememberedSessions) {
    this.maxSessions = maxSessions;
  }

  /**
   * The payload with this session's envelope for sequence number `seq`. Throws
   * `invalid_message` when the payload already uses the reserved key.
   */
  seal(payload: Record<string, unknown>, seq: number): Record<string, unknown> {
    if (Object.hasOwn(payload, envelopeKey)) {
      throw new SyncError('invalid_message', `the payload key ${envelopeKey} is reserved`);
    }
    return { ...payload, [envelopeKey]: { s: this.session, n: seq } };
  }

  /**
   * The payload of a message from device `from` without its envelope, or undefined when it is a
   * copy already delivered. A payload without an envelope passes unchanged.
   */
  open(from: string, payload: Record<string, unknown>): Record<string, unknown> | undefined {
    const envelope = envelopeOf(payload);
    if (envelope === undefined) return payload;
    const key = `${from} ${envelope.s}`;
    const last = this.seen.get(key);
    if (last !== undefined && envelope.n <= last) return undefined;
    // Re-inserted at the end: the map's order is the order of the last advance.
    this.seen.delete(key);
    this.seen.set(key, envelope.n);
    if (this.seen.size > this.maxSessions) {
      this.seen.delete(this.seen.keys().next().value as string);
    }
    const { [envelopeKey]: _, ...rest } = payload;
    return rest;
  }
}
