import { fromBase64, toBase64 } from './base64.ts';
import { type E2EKey, open, seal } from './e2e-key.ts';

/**
 * How the Yjs provider's binary messages travel as relay payloads (JSON objects):
 *
 * - `{y: 1, doc, d}`: one whole message, `d` its bytes in base64;
 * - `{y: 1, doc, d, m, i, n}`: piece `i` of `n` of message `m`, when the whole would not fit
 *   in one relay frame (`message.maxBytes`); the pieces of one message are sent one after the
 *   other and the relay keeps each sender's order;
 * - `kc` besides, when the document is encrypted: the key check value of the sender's key
 *   (see `E2EKey.check`), and `d` holds the sealed bytes.
 *
 * `doc` is the document's name inside the room, so several documents share one connection.
 */
export interface YjsPayload {
  y: 1;
  doc: string;
  d: string;
  kc?: string;
  m?: string;
  i?: number;
  n?: number;
  [key: string]: unknown;
}

/** Room for the frame around `d`: `to`, the other keys, the connection's `_sync` envelope. */
const frameOverheadBytes = 640;
/** Most pieces one message may have (a 1 GiB message at the smallest frame that makes sense). */
const maxPieces = 1_000_000;
const encoder = new TextEncoder();

/** Largest number of message bytes one payload carries for a given frame limit and name. */
export function pieceBytes(maxMessageBytes: number, doc: string): number {
  const room = maxMessageBytes - frameOverheadBytes - encoder.encode(JSON.stringify(doc)).length;
  return Math.floor(room / 4) * 3;
}

/**
 * The payloads of one message: sealed first when `key` is set, then cut in pieces of at most
 * `chunkBytes` bytes. `id` names the message among this sender's.
 */
export async function encodePayloads(
  body: Uint8Array,
  options: { doc: string; key: E2EKey | undefined; chunkBytes: number; id: string },
): Promise<YjsPayload[]> {
  const { doc, key, chunkBytes, id } = options;
  const bytes = key === undefined ? body : await seal(key, body);
  const check = key === undefined ? {} : { kc: key.check };
  if (bytes.length <= chunkBytes) return [{ y: 1, doc, ...check, d: toBase64(bytes) }];
  const n = Math.ceil(bytes.length / chunkBytes);
  const payloads: YjsPayload[] = [];
  for (let i = 0; i < n; i += 1) {
    const d = toBase64(bytes.subarray(i * chunkBytes, (i + 1) * chunkBytes));
    payloads.push({ y: 1, doc, ...check, m: id, i, n, d });
  }
  return payloads;
}

/** The plain bytes of a whole message, or why they cannot be trusted (an error code and line). */
export type Unsealed = { body: Uint8Array } | { refused: string; message: string };

/**
 * Opens a whole message from device `from` with this device's key (undefined: not encrypted).
 * A message sealed with another passphrase, or encrypted where this device is not (and the
 * other way round), or one that fails its integrity check is refused.
 */
export async function unseal(
  key: E2EKey | undefined,
  doc: string,
  from: string,
  message: { bytes: Uint8Array<ArrayBuffer>; check: string | undefined },
): Promise<Unsealed> {
  const { bytes, check } = message;
  if (key === undefined) {
    if (check === undefined) return { body: bytes };
    return {
      refused: 'encrypted',
      message: `device ${from} encrypts document "${doc}": open it with the passphrase to read its messages`,
    };
  }
  if (check === undefined) {
    return {
      refused: 'not_encrypted',
      message: `device ${from} sent an unencrypted message to encrypted document "${doc}"; it was dropped`,
    };
  }
  if (check !== key.check) {
    return {
      refused: 'wrong_passphrase',
      message: `device ${from} uses another passphrase for document "${doc}"; its messages are dropped`,
    };
  }
  const plain = await open(key, bytes);
  if (plain !== undefined) return { body: plain };
  return {
    refused: 'decrypt_failed',
    message: `a message from device ${from} failed its integrity check; it was dropped`,
  };
}

/** Whether a relay payload is a provider message (of any document). */
export function isYjsPayload(payload: Record<string, unknown>): payload is YjsPayload {
  return payload.y === 1 && typeof payload.doc === 'string' && typeof payload.d === 'string';
}

/** What `Reassembler.accept` made of one payload. */
export type Assembled =
  | { kind: 'whole'; bytes: Uint8Array<ArrayBuffer>; check: string | undefined }
  | { kind: 'partial' }
  | { kind: 'invalid'; reason: string };

/**
 * Puts pieces back together, one message in progress per sender: a piece of another message
 * (after pieces were lost to a relay buffer that overflowed) drops the unfinished one.
 */
export class Reassembler {
  private readonly inProgress = new Map<string, { id: string; parts: Uint8Array<ArrayBuffer>[] }>();

  accept(from: string, payload: YjsPayload): Assembled {
    const bytes = fromBase64(payload.d);
    if (bytes === undefined) return { kind: 'invalid', reason: 'its data is not base64' };
    if (payload.kc !== undefined && typeof payload.kc !== 'string') {
      return { kind: 'invalid', reason: 'its key check is not a string' };
    }
    const check = payload.kc;
    if (payload.m === undefined) return { kind: 'whole', bytes, check };
    const { m: id, i, n } = payload;
    if (
      typeof id !== 'string' ||
      !Number.isInteger(i) ||
      !Number.isInteger(n) ||
      (n as number) < 2 ||
      (n as number) > maxPieces ||
      (i as number) < 0 ||
      (i as number) >= (n as number)
    ) {
      return { kind: 'invalid', reason: 'its piece numbers are wrong' };
    }
    let current = this.inProgress.get(from);
    if (current?.id !== id || current.parts.length !== i) {
      this.inProgress.delete(from);
      if (i !== 0) return { kind: 'partial' }; // the start was lost: wait for the next message
      current = { id, parts: [] };
      this.inProgress.set(from, current);
    }
    current.parts.push(bytes);
    if (current.parts.length < (n as number)) return { kind: 'partial' };
    this.inProgress.delete(from);
    return { kind: 'whole', bytes: concat(current.parts), check };
  }
}

function concat(parts: Uint8Array<ArrayBuffer>[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
