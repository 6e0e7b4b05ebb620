import * as crypto from 'node:crypto';
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../log.ts';

/** Bytes of a seal: a full HMAC-SHA-256. */
export const sealBytes = 32;
/** SHA-256's block: the HMAC key is padded to it. */
const blockBytes = 64;

/** `crypto.hash` (node 20.12 and later): a one-shot digest without a Hash object. */
const oneShot = (
  crypto as { hash?: (algorithm: string, data: Uint8Array, out: 'buffer') => Buffer }
).hash;

/** The key XORed with HMAC's pad byte over one block (RFC 2104). */
function padded(key: Buffer, pad: number): Buffer {
  const block = Buffer.alloc(blockBytes, pad);
  for (let i = 0; i < key.length; i++) block[i] = (block[i] ?? 0) ^ (key[i] ?? 0);
  return block;
}

/** What a seal covers besides the bytes: the kind of record, so no record passes for another. */
export type RecordKind =
  | 'frame'
  | 'roster'
  | 'revocation'
  | 'beat'
  | 'position'
  | 'release'
  /** An answer to a device or room check without the shared secret's MAC. */
  | 'check';

/** A dropped record is said at most this often, with the count since the last line. */
const warnEveryMs = 60_000;

/**
 * The seal of every record a cluster process puts in NATS (frames in the rooms' streams, roster
 * entries, revocations, heartbeats, positions, release requests and answers): an HMAC-SHA-256,
 * with a key derived by HKDF from the shared secret (`auth.secret` / `AUTH_SECRET`), over the
 * record's kind, its name (the subject or the bucket key it is stored under: a record cannot be
 * moved to another room or device) and its bytes, appended to the bytes. A NATS client without
 * the secret can neither make a record the nodes take nor move one; what fails is dropped,
 * counted (`rejected`) and said in a warning line at most once a minute.
 */
export class RecordSeal {
  readonly #key: Buffer;
  /** The key XORed with HMAC's inner and outer pads, for the one-shot digests of `tag`. */
  readonly #innerPad: Buffer;
  readonly #outerPad: Buffer;
  /** Records dropped for a missing or wrong seal since start. */
  rejected = 0;
  #unsaid = 0;
  #saidAt = Number.NEGATIVE_INFINITY;
  #logger: Logger | undefined;

  constructor(secret: string, logger?: Logger) {
    this.#key = Buffer.from(
      hkdfSync('sha256', secret, 'sync-host cluster', 'record seal v1', sealBytes),
    );
    this.#innerPad = padded(this.#key, 0x36);
    this.#outerPad = padded(this.#key, 0x5c);
    this.#logger = logger;
  }

  /**
   * The seal of `data` stored as `kind` under `name`: HMAC-SHA-256 over `kind\0name\0data`.
   * Computed as RFC 2104 defines it, with two one-shot digests over the precomputed pads: the
   * same bytes as `createHmac`, whose object (a digest fetched by name, the key set up again)
   * cost more than the digests on every record of the cluster's per-message path.
   */
  tag(kind: RecordKind, name: string, data: Uint8Array): Buffer {
    const label = `${kind}\0${name}\0`;
    if (oneShot === undefined) {
      return createHmac('sha256', this.#key).update(label).update(data).digest();
    }
    const labelBytes = Buffer.byteLength(label, 'utf8');
    const inner = Buffer.allocUnsafe(blockBytes + labelBytes + data.length);
    this.#innerPad.copy(inner, 0);
    inner.write(label, blockBytes, 'utf8');
    inner.set(data, blockBytes + labelBytes);
    const outer = Buffer.allocUnsafe(blockBytes + sealBytes);
    this.#outerPad.copy(outer, 0);
    oneShot('sha256', inner, 'buffer').copy(outer, blockBytes);
    return oneShot('sha256', outer, 'buffer');
  }

  /** `data` followed by its seal. */
  seal(kind: RecordKind, name: string, data: Uint8Array | string): Buffer {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    return Buffer.concat([bytes, this.tag(kind, name, bytes)]);
  }

  /** Whether the last {@link sealBytes} of `sealed` are the seal of the rest; counts a failure. */
  verify(kind: RecordKind, name: string, sealed: Uint8Array): boolean {
    if (sealed.length >= sealBytes) {
      const end = sealed.length - sealBytes;
      const expected = this.tag(kind, name, sealed.subarray(0, end));
      if (timingSafeEqual(expected, sealed.subarray(end))) return true;
    }
    this.reject(kind);
    return false;
  }

  /** The bytes of a sealed record, undefined (counted and said) when its seal fails. */
  open(kind: RecordKind, name: string, sealed: Uint8Array): Buffer | undefined {
    if (!this.verify(kind, name, sealed)) return undefined;
    return Buffer.from(sealed.buffer, sealed.byteOffset, sealed.length - sealBytes);
  }

  /** The text of a sealed record (a JSON value), undefined when its seal fails. */
  openText(kind: RecordKind, name: string, sealed: Uint8Array): string | undefined {
    return this.open(kind, name, sealed)?.toString('utf8');
  }

  /**
   * Counts a dropped record; a warning line at most once a minute, unless `said` (its caller
   * has a line of its own).
   */
  reject(kind: RecordKind, said = false): void {
    this.rejected++;
    if (said) return;
    this.#unsaid++;
    const at = Date.now();
    if (this.#logger === undefined || at - this.#saidAt < warnEveryMs) return;
    this.#logger.warn(
      { kind, dropped: this.#unsaid, total: this.rejected },
      'cluster: dropped records without the shared secret’s seal (another NATS client, or a node with another auth.secret)',
    );
    this.#saidAt = at;
    this.#unsaid = 0;
  }
}

/** One seal per secret in a process, so its relay's broker and revocations count together. */
const seals = new Map<string, RecordSeal>();

/** The process's seal for `secret`. */
export function recordSealFor(secret: string, logger?: Logger): RecordSeal {
  let seal = seals.get(secret);
  if (seal === undefined) {
    seal = new RecordSeal(secret, logger);
    seals.set(secret, seal);
  }
  return seal;
}
