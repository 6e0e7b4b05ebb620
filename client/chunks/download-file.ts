import { createHash, type Hash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { type FileHandle, open, rm } from 'node:fs/promises';
import { chunkIdSchema } from '../../protocol/relay-frames.ts';
import { SyncError } from '../errors.ts';
import { ByteWindow } from './byte-window.ts';
import { type ChunkRef, type ChunkTransfer, maxChunkBytes } from './chunk-transfer.ts';

/** What a download wrote: the file's size and SHA-256 (hex). */
export interface DownloadedFile {
  size: number;
  digest: string;
}

/** A chunk and where its bytes go in the file. */
export interface PlacedChunk extends ChunkRef {
  offset: number;
}

/**
 * What a prefetch left in a temporary file: the indexes of the chunks it wrote at their place,
 * and the SHA-256 state of the file's first `hashedBytes` bytes (chunks it wrote in order).
 */
export interface Resume {
  present: ReadonlySet<number>;
  hash: Hash;
  hashedBytes: number;
}

/** An existing file, opened for writing in place; never through a symbolic link. */
const inPlaceFlags = constants.O_RDWR | constants.O_NOFOLLOW;

/**
 * Opens the temporary file at `tempPath` to write into: the existing file when its inode is
 * given (`ino`: the file the caller made; a folder above it swapped for a link since leads to
 * another file or none, and nothing is written), else a file created or emptied there.
 */
async function openTemp(
  tempPath: string,
  ino: number | undefined,
  inPlace: boolean,
): Promise<FileHandle> {
  if (ino === undefined) return open(tempPath, inPlace ? inPlaceFlags : 'w');
  const handle = await open(tempPath, inPlaceFlags);
  if ((await handle.stat()).ino !== ino) {
    await handle.close();
    throw new SyncError(
      'folder_unusable',
      `${tempPath} is no longer the file made for it (a folder above it changed)`,
    );
  }
  if (!inPlace) await handle.truncate(0);
  return handle;
}

/** Checks a chunk list that came from another device before anything is fetched. */
export function checkRefs(chunks: ChunkRef[]): void {
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
 * With `resume` (what a prefetch wrote into `tempPath` already), the file is kept and only the
 * other chunks are fetched; the part of the file the prefetch's hash does not cover and the
 * fetched chunks do not continue is read back from the disk for the digest. On any failure the temp file is removed and the error thrown; the caller checks the
 * digest against the one it expects before moving the file into place.
 */
export async function downloadFile(
  t: ChunkTransfer,
  chunks: ChunkRef[],
  tempPath: string,
  onBytes?: (n: number) => void,
  resume?: Resume,
  ino?: number,
): Promise<DownloadedFile> {
  checkRefs(chunks);
  const hash = resume?.hash ?? createHash('sha256');
  let hashed = resume?.hashedBytes ?? 0;
  let size = 0;
  const placed: PlacedChunk[] = [];
  for (const [index, ref] of chunks.entries()) {
    if (resume?.present.has(index) !== true) placed.push({ ...ref, offset: size });
    size += ref.size;
  }
  // Not removed when it cannot be opened as the file made for it: that path is not ours then.
  const handle = await openTemp(tempPath, ino, resume !== undefined);
  try {
    try {
      await writeChunks(t, placed, handle, (ref, plain) => {
        if (ref.offset === hashed) {
          hash.update(plain);
          hashed += plain.length;
        }
        onBytes?.(plain.length);
      });
      if (resume !== undefined) await handle.truncate(size);
    } finally {
      await handle.close();
    }
    if (hashed < size) await hashInto(hash, tempPath, hashed);
  } catch (err: unknown) {
    await rm(tempPath, { force: true });
    throw err;
  }
  return { size, digest: hash.digest('hex') };
}

/**
 * Fetches `chunks` into the existing file `tempPath`, each at its offset (a prefetch: the file
 * is not created, truncated nor removed here). Throws as `downloadFile` does.
 */
export async function fetchChunksInto(
  t: ChunkTransfer,
  chunks: PlacedChunk[],
  tempPath: string,
  onChunk: (chunk: PlacedChunk, plain: Uint8Array) => void,
  ino?: number,
): Promise<void> {
  checkRefs(chunks);
  const handle = await openTemp(tempPath, ino, true);
  try {
    await writeChunks(t, chunks, handle, onChunk);
  } finally {
    await handle.close();
  }
}

/** Fetches `chunks` ahead within the transfer's window and writes each at its offset, in order. */
async function writeChunks(
  t: ChunkTransfer,
  chunks: PlacedChunk[],
  handle: FileHandle,
  onChunk: (chunk: PlacedChunk, plain: Uint8Array) => void,
): Promise<void> {
  const window = new ByteWindow(t.maxInFlightBytes);
  const ahead: Array<{ ref: PlacedChunk; plain: Promise<Uint8Array> }> = [];
  let next = 0;
  const fetchAhead = () => {
    while (next < chunks.length && window.tryAcquire(chunks[next]!.size)) {
      const ref = chunks[next++]!;
      const plain = t.get(ref.id);
      plain.catch(() => undefined); // awaited in order below; a failure there ends the download
      ahead.push({ ref, plain });
    }
  };
  fetchAhead();
  for (let fetched = ahead.shift(); fetched !== undefined; fetched = ahead.shift()) {
    const plain = await fetched.plain;
    if (plain.length !== fetched.ref.size) {
      throw new SyncError('chunk_corrupt', `chunk ${fetched.ref.id} is not of its listed size`);
    }
    await handle.write(plain, 0, plain.length, fetched.ref.offset);
    onChunk(fetched.ref, plain);
    window.release(fetched.ref.size);
    fetchAhead();
  }
}

/** SHA-256 of a file, hex, read in a stream (never whole in memory). */
export async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await hashInto(hash, file, 0);
  return hash.digest('hex');
}

/** Adds the bytes of `file` from `start` on to `hash`, read in a stream. */
async function hashInto(hash: Hash, file: string, start: number): Promise<void> {
  for await (const block of createReadStream(file, { start, highWaterMark: 1_048_576 })) {
    hash.update(block as Buffer);
  }
}
