import { createHash } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { chunkIdSchema } from '../../protocol/relay-frames.ts';
import { SyncError } from '../errors.ts';
import { ByteWindow } from './byte-window.ts';
import { type ChunkRef, type ChunkTransfer, maxChunkBytes } from './chunk-transfer.ts';

/** What a download wrote: the file's size and SHA-256 (hex). */
export interface DownloadedFile {
  size: number;
  digest: string;
}

/** Checks a chunk list that came from another device before anything is fetched. */
function checkRefs(chunks: ChunkRef[]): void {
  for (const ref of chunks) {
    const sizeOk = Number.isSafeInteger(ref.size) && ref.size > 0 && ref.size <= maxChunkBytes;
    if (!sizeOk || !chunkIdSchema.safeParse(ref.id).success) {
      throw new SyncError(
        'invalid_payload',
        `a chunk list names an invalid chunk (${String(ref.id).slice(0, 60)})`,
      );
    }
  }
}

/**
 * Fetches `chunks` from the host and writes them, in order, to `tempPath` (created or
 * truncated), fetching ahead at most `t.maxInFlightBytes`. Only chunks that passed their check
 * are written (see `ChunkTransfer.get`); a chunk of another size than its ref is `chunk_corrupt`.
 * On any failure the temp file is removed and the error thrown; the caller checks the digest
 * against the one it expects before moving the file into place.
 */
export async function downloadFile(
  t: ChunkTransfer,
  chunks: ChunkRef[],
  tempPath: string,
  onBytes?: (n: number) => void,
): Promise<DownloadedFile> {
  checkRefs(chunks);
  const hash = createHash('sha256');
  const handle = await open(tempPath, 'w');
  const window = new ByteWindow(t.maxInFlightBytes);
  const ahead: Array<{ ref: ChunkRef; plain: Promise<Uint8Array> }> = [];
  let next = 0;
  const fetchAhead = () => {
    while (next < chunks.length && window.tryAcquire(chunks[next]!.size)) {
      const ref = chunks[next++]!;
      const plain = t.get(ref.id);
      plain.catch(() => undefined); // awaited in order below; a failure there ends the download
      ahead.push({ ref, plain });
    }
  };
  let size = 0;
  try {
    fetchAhead();
    for (let fetched = ahead.shift(); fetched !== undefined; fetched = ahead.shift()) {
      const plain = await fetched.plain;
      if (plain.length !== fetched.ref.size) {
        throw new SyncError('chunk_corrupt', `chunk ${fetched.ref.id} is not of its listed size`);
      }
      await handle.write(plain);
      hash.update(plain);
      size += plain.length;
      onBytes?.(plain.length);
      window.release(fetched.ref.size);
      fetchAhead();
    }
    await handle.close();
  } catch (err: unknown) {
    await handle.close();
    await rm(tempPath, { force: true });
    throw err;
  }
  return { size, digest: hash.digest('hex') };
}
