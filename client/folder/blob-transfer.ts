import {
  ChunkTransfer,
  downloadFile,
  fetchChunksInto,
  type PlacedChunk,
  type Resume,
  uploadFile,
} from '../chunks/index.ts';
import type { E2EKey } from '../e2e-key.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { noticeSender } from './blob-notices.ts';

/** A file's chunk list as the folder document keeps it: chunk id and plaintext size. */
export type ChunkList = [string, number][];

/** What moves a file's bytes to and from the host (client/chunks on the current connection). */
export interface BlobTransfer {
  /** With `announce`, the devices online hear of the chunks as the host gets them. */
  upload(
    file: string,
    onBytes: (n: number) => void,
    announce?: { path: string; size: number },
  ): Promise<{ chunks: ChunkList; size: number; digest: string }>;
  /**
   * `resume`: what a prefetch wrote into `temp` already; `ino`: the inode of the temporary file
   * made for it (nothing is written to another file at that path).
   */
  download(
    chunks: ChunkList,
    temp: string,
    onBytes: (n: number) => void,
    resume?: Resume,
    ino?: number,
  ): Promise<{ size: number; digest: string }>;
  /** Fetches `chunks` into the existing file `temp`, each at its offset (a prefetch). */
  fetchInto(
    chunks: PlacedChunk[],
    temp: string,
    onChunk: (chunk: PlacedChunk, plain: Uint8Array) => void,
    ino?: number,
  ): Promise<void>;
  /** Which of `ids` the host holds (and marks them used there). */
  held(ids: string[]): Promise<Set<string>>;
}

/**
 * The folder sync's file transfers over one relay connection (client/chunks), sealed with the
 * project's key when it has one; an upload tells the devices online which chunks the host
 * holds as it goes (blob-notices.ts). `close()` rejects what is under way (the queue tries
 * again on the next connection). `onLost` hears of the chunks the host dropped as damaged.
 */
export function blobTransferOf(
  connection: RelayConnection,
  key: E2EKey | undefined,
  onLost?: (ids: string[]) => void,
): BlobTransfer & { close(): void } {
  const t = new ChunkTransfer({ connection, key, ...(onLost === undefined ? {} : { onLost }) });
  return {
    async upload(file, onBytes, announce) {
      const notices = announce === undefined ? undefined : noticeSender(connection, key, announce);
      const sent = await uploadFile(t, file, onBytes, notices?.held);
      await notices?.end();
      return {
        chunks: sent.chunks.map((chunk) => [chunk.id, chunk.size]),
        size: sent.size,
        digest: sent.digest,
      };
    },
    download: (chunks, temp, onBytes, resume, ino) =>
      downloadFile(
        t,
        chunks.map(([id, size]) => ({ id, size })),
        temp,
        onBytes,
        resume,
        ino,
      ),
    fetchInto: (chunks, temp, onChunk, ino) => fetchChunksInto(t, chunks, temp, onChunk, ino),
    held: (ids) => t.held(ids),
    close: () => t.close(),
  };
}
