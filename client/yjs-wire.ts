import { toBase64 } from './base64.ts';
import { type E2EKey, open, seal } from './e2e-key.ts';
import type { ClientErrorCode } from './errors.ts';

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

/** Why a message cannot be trusted: an error code and a line naming the sending device. */
export interface Refusal {
  refused: ClientErrorCode;
  message: string;
}

/** The plain bytes of a whole message, or why they cannot be trusted. */
export type Unsealed = { body: Uint8Array } | Refusal;

/**
 * Whether a message with key check value `check` (undefined: not encrypted) from device `from`
 * may be read by a device whose own check value is `own` (undefined: not encrypted): refused
 * when sealed with another passphrase (`wrong_passphrase`), encrypted where this device is not
 * (`encrypted`) or the other way round (`not_encrypted`). Undefined when it may.
 */
export function keyRefusal(
  own: string | undefined,
  check: string | undefined,
  doc: string,
  from: string,
): Refusal | undefined {
  if (own === undefined) {
    if (check === undefined) return undefined;
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
  if (check !== own) {
    return {
      refused: 'wrong_passphrase',
      message: `device ${from} uses another passphrase for document "${doc}"; its messages are dropped`,
    };
  }
  return undefined;
}

/**
 * Opens a whole message from device `from` with this device's key (undefined: not encrypted).
 * A message `keyRefusal` refuses, or one that fails its integrity check, is refused.
 */
export async function unseal(
  key: E2EKey | undefined,
  doc: string,
  from: string,
  message: { bytes: Uint8Array<ArrayBuffer>; check: string | undefined },
): Promise<Unsealed> {
  const { bytes, check } = message;
  const refusal = keyRefusal(key?.check, check, doc, from);
  if (refusal !== undefined) return refusal;
  if (key === undefined) return { body: bytes };
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
