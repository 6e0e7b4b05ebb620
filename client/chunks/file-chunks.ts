import { open } from 'node:fs/promises';

/**
 * Reads the file at `path` as fixed blocks of `chunkBytes` (the last one shorter; none for an
 * empty file), one at a time: never the whole file in memory. Each block is a buffer of its own,
 * so a caller may keep it while reading on.
 *
 * Fixed blocks, not content-defined chunking, for now: measured on a 100 MiB file (docs/client.md,
 * "Files through the host"), they send about the change for a change in place or an append and
 * cut faster, but an insertion that shifts the rest by other than whole blocks costs them the
 * rest of the file, where FastCDC sends about the change. No maintained FastCDC package is a
 * dependency yet; the chunk lists carry each chunk's size, so readers need no change when the
 * cutting does.
 */
export async function* fileChunks(path: string, chunkBytes: number): AsyncGenerator<Uint8Array> {
  const handle = await open(path, 'r');
  try {
    for (;;) {
      const block = new Uint8Array(chunkBytes);
      let filled = 0;
      while (filled < chunkBytes) {
        const { bytesRead } = await handle.read(block, filled, chunkBytes - filled, null);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled > 0) yield filled === chunkBytes ? block : block.slice(0, filled);
      if (filled < chunkBytes) return;
    }
  } finally {
    await handle.close();
  }
}
