import crypto, { webcrypto } from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';

/**
 * Random bytes from a seed, for a model test that must replay a failing run exactly: entry ids
 * (`randomBytes`) and Yjs client ids (lib0 draws them from `crypto.getRandomValues`) come from
 * one generator while a seed is set, and from the system otherwise. Import this module before
 * yjs: lib0 keeps the function it finds when it loads.
 */

const systemRandomBytes = crypto.randomBytes;
const systemRandomValues = webcrypto.getRandomValues.bind(webcrypto);
let state: number | undefined;

/** The next 32 bits of a splitmix32 sequence. */
function next(): number {
  state = ((state ?? 0) + 0x9e3779b9) | 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

function fill(bytes: Uint8Array): void {
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = next() & 0xff;
}

(crypto as { randomBytes: unknown }).randomBytes = (size: number, callback?: unknown) => {
  if (state === undefined || callback !== undefined)
    return (systemRandomBytes as (size: number, callback?: unknown) => Buffer)(size, callback);
  const bytes = Buffer.alloc(size);
  fill(bytes);
  return bytes;
};
(webcrypto as { getRandomValues: unknown }).getRandomValues = (array: Uint8Array) => {
  if (state === undefined) return systemRandomValues(array);
  fill(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
  return array;
};
syncBuiltinESMExports();

/** From now on, random bytes follow `seed`; undefined gives the system's back. */
export function seedRandom(seed: number | undefined): void {
  state = seed;
}

/** A seed that follows a value: the same run of a model test gets the same ids. */
export function seedOf(value: unknown): number {
  const digest = crypto.createHash('sha256').update(JSON.stringify(value)).digest();
  return digest.readInt32LE(0);
}
