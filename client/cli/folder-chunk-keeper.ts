import { join } from 'node:path';
import type { BlobTransfer } from './folder-blobs.ts';
import { type BlobVersion, blobDigest } from './folder-doc.ts';
import type { EntryIndex } from './folder-index.ts';
import type { FolderMirror } from './folder-mirror.ts';

/** How often a sync that stays connected asks about its chunks again (the host's sweep counts days). */
const keepEveryMs = 12 * 3_600_000;

/** What the keeper needs of the folder sync. */
export interface ChunkKeeperHost {
  readonly dir: string;
  transfer(): BlobTransfer | undefined;
  /** The versions the folder's live files have now. */
  versions(): { path: string; version: BlobVersion }[];
  /** The digest the disk record of `path` has (what the file here holds, as last read). */
  recordDigest(path: string): string | undefined;
  say(kind: 'out' | 'problem', line: string): void;
}

/**
 * Keeps the chunks of the folder's files on the host. The host drops a chunk no device asked
 * about for longer than its history window (`store.historyDays` + 1 day), so a file nobody
 * changes would lose its chunks there: at each connection, and every 12 hours while connected,
 * the sync asks about every chunk its live files name (`chunk-have`, which marks them used).
 * A chunk the host no longer holds (its store was replaced or lost it) is put again from this
 * device when the file here still holds that version; else a device that holds it does so at
 * its next connection, and until then the file waits on the devices that lack it.
 */
export class ChunkKeeper {
  private running = false;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly host: ChunkKeeperHost) {}

  /** Asks now (the connection is back) and then every 12 hours. */
  resume(): void {
    if (this.timer === undefined) {
      this.timer = setInterval(() => void this.keep(), keepEveryMs);
      this.timer.unref?.();
    }
    void this.keep();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round: resolves when done (a dropped connection ends it quietly: the next one asks again). */
  async keep(): Promise<void> {
    const transfer = this.host.transfer();
    if (this.running || transfer === undefined) return;
    this.running = true;
    try {
      const versions = this.host.versions();
      const ids = [...new Set(versions.flatMap(({ version }) => version.chunks.map(([id]) => id)))];
      if (ids.length === 0) return;
      const held = await transfer.held(ids);
      for (const { path, version } of versions) {
        const missing = version.chunks.filter(([id]) => !held.has(id)).length;
        if (missing > 0) await this.putAgain(transfer, path, version, missing);
      }
    } catch {
      // The connection dropped or the host refused: the next connection asks again.
    } finally {
      this.running = false;
    }
  }

  private async putAgain(
    transfer: BlobTransfer,
    path: string,
    version: BlobVersion,
    missing: number,
  ): Promise<void> {
    if (this.host.recordDigest(path) !== blobDigest(version)) {
      this.host.say(
        'problem',
        `the host no longer holds ${missing} chunk(s) of ${path}; a device that has this version puts them back at its next connection`,
      );
      return;
    }
    // The upload puts only the chunks the host lacks; the same bytes give the same chunk ids.
    const sent = await transfer.upload(join(this.host.dir, path), () => undefined);
    if (sent.digest === version.digest) {
      this.host.say('out', `put ${path} back on the host (${missing} chunk(s) it no longer held)`);
    }
  }
}

/** The keeper of a folder sync: the live files' versions from its index, their records from its mirror. */
export function keeperOf(
  dir: string,
  transfer: () => BlobTransfer | undefined,
  index: EntryIndex,
  mirror: FolderMirror,
): ChunkKeeper {
  return new ChunkKeeper({
    dir,
    transfer,
    versions: () =>
      [...index.paths()].flatMap((path) => {
        const version = index.winnerAt(path)?.blob;
        return version === undefined ? [] : [{ path, version }];
      }),
    recordDigest: (path) => mirror.onDisk.get(path)?.digest,
    say: (kind, line) => mirror.say(kind, line),
  });
}
