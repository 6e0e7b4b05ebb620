import { createHash } from 'node:crypto';
import { maxChunkIdsPerHave } from '../../protocol/relay-frames.ts';
import { ByteWindow } from './byte-window.ts';
import type { ChunkRef, ChunkTransfer } from './chunk-transfer.ts';
import type { PlacedChunk } from './download-file.ts';
import { fileChunks } from './file-chunks.ts';

/** What an upload made of a file: its chunks in order, its size and its SHA-256 (hex). */
export interface UploadedFile {
  chunks: ChunkRef[];
  size: number;
  digest: string;
}

interface Read {
  id: string;
  plain: Uint8Array;
  offset: number;
}

/**
 * Sends the file at `path` to the host as chunks, sending only those the host lacks (asked with
 * `chunk-have` for each batch read), with at most `t.maxInFlightBytes` being put at once and as
 * much read ahead: memory stays bounded whatever the file's size. `onBytes` counts the file's
 * bytes as they are known to be on the host (held already or stored); `onHeld` names each chunk
 * (with its place in the file) once the host holds it, for devices that fetch while the file
 * still goes up (a chunk repeated in the file is named at its first place only). Resolves once every chunk
 * is stored; rejects with the first error (`store_full`, `not_joined`...), after the puts under
 * way have settled.
 */
export async function uploadFile(
  t: ChunkTransfer,
  path: string,
  onBytes?: (n: number) => void,
  onHeld?: (chunk: PlacedChunk) => void,
): Promise<UploadedFile> {
  const hash = createHash('sha256');
  const chunks: ChunkRef[] = [];
  const seen = new Set<string>();
  const puts = new PutWindow(t, onBytes, onHeld);
  let batch: Read[] = [];
  let batchBytes = 0;
  let size = 0;
  try {
    for await (const plain of fileChunks(path, t.chunkBytes)) {
      hash.update(plain);
      const offset = size;
      size += plain.length;
      const id = await t.idOf(plain);
      chunks.push({ id, size: plain.length });
      if (seen.has(id)) {
        onBytes?.(plain.length); // the same content earlier in the file: on its way already
        continue;
      }
      seen.add(id);
      batch.push({ id, plain, offset });
      batchBytes += plain.length;
      if (batch.length >= maxChunkIdsPerHave || batchBytes >= t.maxInFlightBytes) {
        await puts.sendMissing(batch);
        batch = [];
        batchBytes = 0;
      }
    }
    await puts.sendMissing(batch);
  } finally {
    await puts.settled();
  }
  puts.throwFailure();
  return { chunks, size, digest: hash.digest('hex') };
}

/** The puts of one upload under way, within the transfer's window; remembers the first failure. */
class PutWindow {
  private readonly window: ByteWindow;
  private readonly running = new Set<Promise<void>>();
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly t: ChunkTransfer,
    private readonly onBytes: ((n: number) => void) | undefined,
    private readonly onHeld: ((chunk: PlacedChunk) => void) | undefined,
  ) {
    this.window = new ByteWindow(t.maxInFlightBytes);
  }

  /** Asks which of `batch` the host holds and starts putting the others. */
  async sendMissing(batch: Read[]): Promise<void> {
    if (batch.length === 0) return;
    this.throwFailure();
    const held = await this.t.held(batch.map((read) => read.id));
    for (const { id, plain, offset } of batch) {
      const stored = () => {
        this.onBytes?.(plain.length);
        this.onHeld?.({ id, size: plain.length, offset });
      };
      if (held.has(id)) {
        stored();
        continue;
      }
      await this.window.acquire(plain.length);
      this.throwFailure();
      const put = this.t.put(id, plain).then(stored, (error: unknown) => {
        this.failure ??= { error };
      });
      const tracked = put.finally(() => {
        this.window.release(plain.length);
        this.running.delete(tracked);
      });
      this.running.add(tracked);
    }
  }

  /** Waits for every put under way. */
  async settled(): Promise<void> {
    await Promise.all([...this.running]);
  }

  /** Throws the first put's failure, if any. */
  throwFailure(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }
}
