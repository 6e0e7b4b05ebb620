import { createHash } from 'node:crypto';
import type { Frame, RelayClient } from './relay-client.ts';

/**
 * The document store's frames spoken from a raw relay client (docs/store.md): an append waited
 * for until its answer, a catch-up collected up to `caughtup`.
 */

/** `text` in base64, as an append carries it. */
export const b64 = (text: string) => Buffer.from(text).toString('base64');

/** The data of a stored entry as text. */
export const entryText = (entry: Frame) => Buffer.from(entry.data as string, 'base64').toString();

/** Sends a catch-up and collects its pages up to `caughtup`. */
export async function catchUp(
  client: RelayClient,
  doc: string,
  after = 0,
  extra: Record<string, unknown> = {},
): Promise<{ entries: Frame[]; pos: number; pages: number }> {
  client.send({ type: 'catchup', doc, after, ...extra });
  const entries: Frame[] = [];
  let pages = 0;
  for (;;) {
    const frame = await client.take(
      (f) => (f.type === 'stored' || f.type === 'caughtup' || f.type === 'error') && f.doc === doc,
    );
    if (frame.type === 'error') throw new Error(`catch-up refused: ${JSON.stringify(frame)}`);
    if (frame.type === 'caughtup') return { entries, pos: frame.pos as number, pages };
    pages++;
    entries.push(...(frame.entries as Frame[]));
  }
}

/** Appends and waits for its answer (`appended` or an error naming its ref). */
export async function append(
  client: RelayClient,
  doc: string,
  ref: number,
  data: string,
  extra: Record<string, unknown> = {},
): Promise<Frame> {
  client.send({ type: 'append', doc, ref, data: b64(data), ...extra });
  return client.take(
    (f) => (f.type === 'appended' || f.type === 'error') && f.doc === doc && f.ref === ref,
  );
}

/**
 * A key's check value and store proof as a device with that key sends them (`kc`, `kp`): the
 * proof made from `label`, the check value the start of its SHA-256 in hex.
 */
export function testKey(label: string): { kc: string; kp: string } {
  const proof = createHash('sha256').update(`test key ${label}`).digest();
  const kc = createHash('sha256').update(proof).digest('hex').slice(0, 16);
  return { kc, kp: proof.toString('base64url') };
}

/** The id of an unencrypted chunk: "s" + base64url of the SHA-256 of its bytes. */
export const plainId = (data: Buffer) =>
  `s${createHash('sha256').update(data).digest('base64url')}`;

/** An id as an encrypted chunk has one ("h" + 43 base64url characters), from `label`. */
export const sealedId = (label: string) =>
  `h${createHash('sha256').update(`sealed ${label}`).digest('base64url')}`;

/** Sends a chunk frame and waits for the answer naming its ref (or an error with it). */
export async function chunkCall(
  client: RelayClient,
  frame: Record<string, unknown>,
): Promise<Frame> {
  client.send(frame);
  return client.take(
    (f) =>
      (f.type === 'chunk-stored' ||
        f.type === 'chunk-held' ||
        f.type === 'chunk' ||
        f.type === 'chunk-dropped' ||
        f.type === 'error') &&
      f.ref === frame.ref,
  );
}

/** Puts `data` as a chunk (unencrypted unless `extra` has `kc`, `kp` and an `id`). */
export function putChunk(
  client: RelayClient,
  ref: number,
  data: Buffer,
  extra: Record<string, unknown> = {},
): Promise<Frame> {
  const frame = { type: 'chunk-put', ref, id: plainId(data), data: data.toString('base64') };
  return chunkCall(client, { ...frame, ...extra });
}
