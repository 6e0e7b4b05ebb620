import { join } from 'node:path';
import type { BlobTransfer } from './blob-transfer.ts';
import { type BlobVersion, blobDigest } from './document.ts';
import type { EntryIndex } from './entry-index.ts';
import type { FolderMirror } from './mirror.ts';

/** How often a sync that stays connected asks about its chunks again (the host's sweep counts days). */
const keepEveryMs = 12 * 3_600_000;
/**
 * A chunk the host reports lost is asked about (and put again) at most once in this time: a
 * report repeated, or a host whose copy keeps going bad, causes no storm of puts.
 */
const lostEveryMs = 60_000;

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
 * its next connection, and until then the file waits on the devices that lack it. When the host
 * drops a chunk a device found damaged (`chunks-lost`), the sync asks about that chunk at once.
 */
export class ChunkKeeper {
  private running = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** A full round is due (the connection is back, or 12 hours passed). */
  private fullDue = false;
  /** Chunks the host reported lost, not asked about yet. */
  private lostIds = new Set<string>();
  /** When each chunk reported lost was last taken up. */
  private readonly lostAt = new Map<string, number>();

  constructor(
    private readonly host: ChunkKeeperHost,
    private readonly now: () => number = Date.now,
  ) {}

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
  keep(): Promise<void> {
    this.fullDue = true;
    return this.run();
  }

  /**
   * The host dropped these chunks as damaged: asks about those the live files name now, and
   * puts back the ones it lacks from the files here (each id at most once a minute).
   */
  lost(ids: readonly string[]): Promise<void> {
    const at = this.now();
    for (const [id, when] of this.lostAt) if (when <= at - lostEveryMs) this.lostAt.delete(id);
    for (const id of ids) {
      if (this.lostAt.has(id)) continue;
      this.lostAt.set(id, at);
      this.lostIds.add(id);
    }
    return this.run();
  }

  /** Runs the rounds due, one at a time; a round asked for meanwhile runs after. */
  private async run(): Promise<void> {
    const transfer = this.host.transfer();
    if (this.running || transfer === undefined) return;
    this.running = true;
    try {
      while (this.fullDue || this.lostIds.size > 0) {
        const only = this.fullDue ? undefined : this.lostIds;
        this.fullDue = false;
        this.lostIds = new Set();
        await this.round(transfer, only);
      }
    } catch {
      // The connection dropped or the host refused: the next connection asks again.
    } finally {
      this.running = false;
    }
  }

  /** Asks about the chunks of the live files (only those among `only`, when given). */
  private async round(transfer: BlobTransfer, only?: ReadonlySet<string>): Promise<void> {
    const named = (id: string) => only === undefined || only.has(id);
    const versions = this.host
      .versions()
      .filter(({ version }) => version.chunks.some(([id]) => named(id)));
    const ids = versions.flatMap(({ version }) => version.chunks.map(([id]) => id));
    const asked = [...new Set(ids.filter(named))];
    if (asked.length === 0) return;
    const held = await transfer.held(asked);
    for (const { path, version } of versions) {
      const missing = version.chunks.filter(([id]) => named(id) && !held.has(id)).length;
      if (missing > 0) await this.putAgain(transfer, path, version, missing, only === undefined);
    }
  }

  private async putAgain(
    transfer: BlobTransfer,
    path: string,
    version: BlobVersion,
    missing: number,
    sayWhenAbsent: boolean,
  ): Promise<void> {
    if (this.host.recordDigest(path) !== blobDigest(version)) {
      // After a `chunks-lost`, the device that found the chunk damaged says already that the
      // file waits; the others that lack it have nothing to add.
      if (!sayWhenAbsent) return;
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
  now: () => number,
): ChunkKeeper {
  return new ChunkKeeper(
    {
      dir,
      transfer,
      versions: () =>
        [...index.paths()].flatMap((path) => {
          const version = index.winnerAt(path)?.blob;
          return version === undefined ? [] : [{ path, version }];
        }),
      recordDigest: (path) => mirror.onDisk.get(path)?.digest,
      say: (kind, line) => mirror.say(kind, line),
    },
    now,
  );
}
