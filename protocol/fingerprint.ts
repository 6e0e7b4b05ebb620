/**
 * A host's certificate fingerprint: the SHA-256 of the certificate's public key (its DER
 * SubjectPublicKeyInfo), so that a certificate renewed with the same key keeps it. Written in
 * base64url without padding (43 characters: the QR code's `#fp=`, the mDNS TXT `fp=`,
 * `/.well-known/sync-host`, `login --fingerprint`); its short form for people to compare is the
 * first 8 bytes in upper-case hex, in groups of four (`3F2A 91C0 77B4 E1D2`).
 */
const base64urlShape = /^[A-Za-z0-9_-]{43}$/;
const hexShape = /^[0-9a-fA-F]{64}$/;

/** The fingerprint (base64url) of 32 digest bytes. */
export function fingerprintOf(digest: Uint8Array): string {
  let binary = '';
  for (const byte of digest) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The 32 bytes of a fingerprint in its base64url form. */
function digestOf(fingerprint: string): Uint8Array {
  const binary = atob(fingerprint.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** The short form people compare: `3F2A 91C0 77B4 E1D2`. */
export function shortFingerprint(fingerprint: string): string {
  const hex = Array.from(digestOf(fingerprint).subarray(0, 8), (b) =>
    b.toString(16).padStart(2, '0'),
  )
    .join('')
    .toUpperCase();
  return hex.match(/.{4}/g)?.join(' ') ?? hex;
}

/**
 * A fingerprint as a person or a script gives it, in its base64url form: the base64url form
 * itself (optionally after `sha256:`), or the 64 hex digits with or without colons and spaces.
 * undefined when it is neither (a short form is not enough to pin a host).
 */
export function parseFingerprint(given: string): string | undefined {
  const text = given.trim().replace(/^sha-?256:/i, '');
  if (base64urlShape.test(text)) return text;
  const hex = text.replace(/[:\s]/g, '');
  if (!hexShape.test(hex)) return undefined;
  const bytes = Uint8Array.from(hex.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16));
  return fingerprintOf(bytes);
}

/** Whether two fingerprints (base64url) are the same, in time independent of where they differ. */
export function sameFingerprint(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
