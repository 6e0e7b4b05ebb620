import { toBase64Url } from './base64.ts';
import { SyncError } from './errors.ts';

/**
 * End-to-end encryption of what a project's devices send each other: a passphrase typed on each
 * device derives one AES-256-GCM key (WebCrypto PBKDF2-SHA-256, salted with the project's room
 * id), and every message is sealed with a fresh random 96-bit nonce. The relay and its buffer
 * only ever hold `nonce ‖ ciphertext ‖ tag`. WebCrypto is `globalThis.crypto.subtle` in browsers
 * and in Node 20.
 */

/** PBKDF2 rounds: OWASP's figure for PBKDF2-HMAC-SHA-256. */
export const defaultIterations = 600_000;
const nonceBytes = 12;
const encoder = new TextEncoder();

/** A derived key: the AES-GCM key and a short check value that tells a wrong passphrase apart. */
export interface E2EKey {
  readonly key: CryptoKey;
  /**
   * 16 hex characters: the start of the SHA-256 of `proof`. A receiver whose value differs knows
   * the sender typed another passphrase, without trying to decrypt. It reveals nothing the
   * ciphertext does not (the passphrase is guessed offline against either at the same PBKDF2
   * cost), and it commits to `proof` without giving it away.
   */
  readonly check: string;
  /**
   * 32 bytes from a separate HKDF branch (`sync-host store proof`), base64url: sent with every
   * entry the device asks the host to store under `check`, and only there (the relay never
   * routes it). The host keeps an entry under a check value only when the SHA-256 of its proof
   * starts with that value, so a device that saw the check value on the wire but has another
   * passphrase (or none) cannot file a forged snapshot under it and make the host compact away
   * what the others wrote.
   */
  readonly proof: string;
  /**
   * 32 bytes from a third HKDF branch (`sync-host doc name`): the HMAC-SHA-256 key of the
   * document names the host sees (see `docKeyOf`), so it never learns them.
   */
  readonly nameKey: Uint8Array;
  /**
   * 32 bytes from a fourth HKDF branch (`sync-host chunk id`): the HMAC-SHA-256 key of the ids
   * of the file chunks the host keeps sealed (see `ChunkTransfer`), so that devices with the
   * same passphrase agree on a chunk's id while the host cannot tell which content it stands for.
   */
  readonly chunkKey: Uint8Array;
}

function subtle(): SubtleCrypto {
  const crypto = globalThis.crypto;
  if (crypto?.subtle === undefined) {
    throw new SyncError(
      'no_webcrypto',
      'encryption needs WebCrypto (a secure context in a browser, Node 20 or later)',
    );
  }
  return crypto.subtle;
}

/**
 * Derives the project key from `passphrase`, salted with `roomId` (the project's room: the same
 * on every device of the user, different between projects), so one passphrase on two projects
 * gives two unrelated keys. Throws `invalid_passphrase` for an empty passphrase.
 */
export async function deriveE2EKey(
  passphrase: string,
  roomId: string,
  iterations = defaultIterations,
): Promise<E2EKey> {
  if (passphrase.length === 0) {
    throw new SyncError('invalid_passphrase', 'the encryption passphrase must not be empty');
  }
  const webCrypto = subtle();
  const material = await webCrypto.importKey('raw', encoder.encode(passphrase), 'PBKDF2', false, [
    'deriveBits',
  ]);
  const master = await webCrypto.deriveBits(
    {
      name: 'PBKDF2',
      hash: 'SHA-256',
      salt: encoder.encode(`sync-host e2e v1 room ${roomId}`),
      iterations,
    },
    material,
    256,
  );
  const hkdf = await webCrypto.importKey('raw', master, 'HKDF', false, ['deriveKey', 'deriveBits']);
  const branch = (info: string) => ({
    name: 'HKDF',
    hash: 'SHA-256',
    salt: new Uint8Array(0),
    info: encoder.encode(info),
  });
  const key = await webCrypto.deriveKey(
    branch('sync-host e2e v1 aes-gcm'),
    hkdf,
    { name: 'AES-GCM', length: 256 },
    false,
    ['encrypt', 'decrypt'],
  );
  const proofBits = new Uint8Array(
    await webCrypto.deriveBits(branch('sync-host store proof'), hkdf, 256),
  );
  const proof = toBase64Url(proofBits);
  const check = keyCheckOf(new Uint8Array(await webCrypto.digest('SHA-256', proofBits)));
  const nameKey = new Uint8Array(
    await webCrypto.deriveBits(branch('sync-host doc name'), hkdf, 256),
  );
  const chunkKey = new Uint8Array(
    await webCrypto.deriveBits(branch('sync-host chunk id'), hkdf, 256),
  );
  return { key, check, proof, nameKey, chunkKey };
}

/** Encrypts `plain`: a random nonce followed by the AES-GCM ciphertext and tag. */
export async function seal(key: E2EKey, plain: Uint8Array): Promise<Uint8Array> {
  // Never a SharedArrayBuffer here: every message is built in an ordinary buffer.
  const data = plain as Uint8Array<ArrayBuffer>;
  const nonce = globalThis.crypto.getRandomValues(new Uint8Array(nonceBytes));
  const sealed = new Uint8Array(
    await subtle().encrypt({ name: 'AES-GCM', iv: nonce }, key.key, data),
  );
  const out = new Uint8Array(nonceBytes + sealed.length);
  out.set(nonce);
  out.set(sealed, nonceBytes);
  return out;
}

/** Decrypts what `seal` made; undefined when it was not sealed with this key or was altered. */
export async function open(
  key: E2EKey,
  sealed: Uint8Array<ArrayBuffer>,
): Promise<Uint8Array | undefined> {
  if (sealed.length < nonceBytes + 16) return undefined;
  try {
    const plain = await subtle().decrypt(
      { name: 'AES-GCM', iv: sealed.subarray(0, nonceBytes) },
      key.key,
      sealed.subarray(nonceBytes),
    );
    return new Uint8Array(plain);
  } catch (err: unknown) {
    // WebCrypto reports a failed tag check as an OperationError, nothing more specific.
    if (err instanceof Error && err.name === 'OperationError') return undefined;
    throw err;
  }
}

/** The key check value that a proof's SHA-256 `digest` commits to: its first 8 bytes in hex. */
export function keyCheckOf(digest: Uint8Array): string {
  return [...digest.subarray(0, 8)].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}
