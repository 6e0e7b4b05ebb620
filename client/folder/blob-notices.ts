import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { chunkIdSchema } from '../../protocol/relay-frames.ts';
import { fromBase64, toBase64 } from '../base64.ts';
import type { PlacedChunk } from '../chunks/index.ts';
import { type E2EKey, open, seal } from '../e2e-key.ts';
import type { RelayConnection } from '../relay-connection.ts';
import type { RelayEvents } from '../relay-events.ts';

/**
 * Notices of files going up as chunks: while a device uploads a version, it tells the devices
 * online in the room which chunks the host holds already, so that they fetch them before the
 * version is published (docs/folder-sync.md, "Fetching while a file goes up"). A notice is a
 * routed broadcast, never kept by the host's store; with the project's key its body is sealed
 * (the file's name is as secret as the folder document).
 */

/** What a notice says: one upload under way (`upload`, random), and chunks the host now holds. */
export interface BlobNotice {
  upload: string;
  path: string;
  size: number;
  chunks: PlacedChunk[];
}

/** Chunks named in one notice at most (a notice stays a few KiB). */
export const maxNoticeChunks = 64;
/** A notice goes once this many chunks are held, or `noticeDelayMs` after the first of them. */
const noticeChunks = 8;
const noticeDelayMs = 100;
/** The payload key that marks a notice among routed messages. */
const noticeMark = 'blobNotice';

const offset = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const bodySchema = z.object({
  u: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  p: z.string().max(4096),
  s: offset,
  c: z.array(z.tuple([chunkIdSchema, z.number().int().min(1), offset])).max(maxNoticeChunks),
});

async function encode(key: E2EKey | undefined, notice: BlobNotice) {
  const body = {
    u: notice.upload,
    p: notice.path,
    s: notice.size,
    c: notice.chunks.map((chunk) => [chunk.id, chunk.size, chunk.offset]),
  };
  const plain = new TextEncoder().encode(JSON.stringify(body));
  if (key === undefined) return { [noticeMark]: 1, d: toBase64(plain) };
  return { [noticeMark]: 1, kc: key.check, d: toBase64(await seal(key, plain)) };
}

/** The notice in a routed payload; undefined for any other payload, or one that fails a check. */
export async function decodeNotice(
  key: E2EKey | undefined,
  payload: Record<string, unknown>,
): Promise<BlobNotice | undefined> {
  if (payload[noticeMark] !== 1 || typeof payload.d !== 'string') return undefined;
  if (payload.kc !== key?.check) return undefined; // another passphrase, or sealed vs clear
  const bytes = fromBase64(payload.d);
  if (bytes === undefined) return undefined;
  const plain = key === undefined ? bytes : await open(key, bytes);
  if (plain === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain));
  } catch {
    return undefined;
  }
  const body = bodySchema.safeParse(json);
  if (!body.success) return undefined;
  const { u, p, s, c } = body.data;
  return {
    upload: u,
    path: p,
    size: s,
    chunks: c.map(([id, size, at]) => ({ id, size, offset: at })),
  };
}

/**
 * The notices of one upload on `connection`: the first goes now (the version is under way);
 * `held` collects chunks, sent in batches; `end` sends what is left and resolves once it is
 * handed to the connection (before the version is published, so a receiver has every notice
 * first). Nothing is sent while no other device is in the room; a notice that cannot be sent
 * (the connection dropped, its queue is full) is left out: a receiver fetches the rest later.
 */
export function noticeSender(
  connection: RelayConnection,
  key: E2EKey | undefined,
  file: { path: string; size: number },
) {
  const upload = randomBytes(12).toString('base64url');
  const pending: PlacedChunk[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sending: Promise<void> = Promise.resolve();
  const send = () => {
    clearTimeout(timer);
    timer = undefined;
    const chunks = pending.splice(0, maxNoticeChunks);
    if (pending.length > 0) send();
    if (connection.state !== 'joined' || connection.devices.length < 2) return;
    sending = sending
      .then(() => encode(key, { upload, ...file, chunks }))
      .then((payload) => connection.send('broadcast', payload, { once: false }))
      .catch(() => undefined); // left out: see above
  };
  send();
  return {
    held(chunk: PlacedChunk): void {
      pending.push(chunk);
      if (pending.length >= noticeChunks) send();
      else timer ??= setTimeout(send, noticeDelayMs);
    },
    end(): Promise<void> {
      if (pending.length > 0) send();
      return sending;
    },
  };
}

/**
 * Calls `onNotice` with each notice another device sends on `source` (the CLI's supervisor, or
 * one relay connection); returns the unsubscribe.
 */
export function listenNotices(
  source: { on(event: 'message', listener: RelayEvents['message']): () => void },
  key: E2EKey | undefined,
  onNotice: (from: string, notice: BlobNotice) => void,
): () => void {
  let order: Promise<void> = Promise.resolve();
  return source.on('message', ({ from, payload }) => {
    if (payload[noticeMark] !== 1) return;
    // Opened in the order they came: a notice's chunks before the next one's.
    order = order
      .then(() => decodeNotice(key, payload))
      .then((notice) => {
        if (notice !== undefined) onNotice(String(from), notice);
      })
      .catch(() => undefined);
  });
}
