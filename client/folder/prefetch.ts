import { createHash, type Hash } from 'node:crypto';
import { join, posix } from 'node:path';
import type { PlacedChunk, Resume } from '../chunks/index.ts';
import type { BlobNotice } from './blob-notices.ts';
import type { BlobTransfer, ChunkList } from './blob-transfer.ts';
import type { Disk } from './disk.ts';
import { pathProblem } from './names.ts';

/**
 * Chunks of files another device is still sending, fetched ahead into temporary files (see
 * blob-notices.ts). A prefetch only ever writes its own temporary file beside the file's path,
 * named and made as a download's (in the folder, `O_EXCL`, never through a link), and only in
 * folders that exist already (a notice makes none); the download of the published version takes
 * it over when its chunks agree (`claim`), and is what puts the file in place, with its checks.
 * A newer upload of the same file by the same device (a file read while it was still being
 * written goes again) carries the prefetch on: its file and what it wrote are kept, and only the
 * chunks that differ are fetched.
 * A prefetch no notice touched for `idleMs` (5 minutes: the sender stopped, or the file went
 * elsewhere) is dropped with its file, as are all of them when the sync stops.
 */

/** Versions one device may have prefetched here at once (its newest uploads). */
export const maxPrefetchesPerSender = 3;
export const defaultPrefetchIdleMs = 5 * 60_000;
/** Uploads recently claimed or dropped: their late notices start nothing. */
const maxForgotten = 64;
const { dirname } = posix;

export interface PrefetchHost {
  readonly dir: string;
  readonly disk: Disk;
  transfer(): BlobTransfer | undefined;
  /** Whether `.syncignore` keeps `path` on this device now (then nothing is fetched). */
  ignores(path: string): boolean;
  maxFileBytes(): number;
  /** Temporary files in use: the folder scan leaves them alone. */
  readonly busyTemps: Set<string>;
}

interface Prefetch {
  /** Its key in `Prefetches.all`: the sender and its upload, the latest one carried on. */
  key: string;
  from: string;
  upload: string;
  path: string;
  size: number;
  temp: string;
  /** The inode of that file: nothing is written to another file at its path. */
  ino: number;
  /** Chunks written to the temporary file, by offset. */
  written: Map<number, PlacedChunk>;
  /**
   * Chunks written or queued, by offset: an offset is fetched once (a repeated notice, or a
   * hostile one naming it again).
   */
  named: Map<number, PlacedChunk>;
  /** Offsets an earlier upload named: fetched again once if this upload names another chunk there. */
  carried: Set<number>;
  /** SHA-256 of the file's first `hashedBytes` (chunks written in order: the download goes on). */
  hash: Hash;
  hashedBytes: number;
  queued: PlacedChunk[];
  running: Promise<void> | undefined;
  idle: ReturnType<typeof setTimeout>;
}

/** A prefetch the download takes over: its file, what it holds of the version, its bytes. */
export interface Claimed {
  temp: string;
  /** The temporary file's inode (what is written goes to that file only). */
  ino: number;
  resume: Resume;
  bytes: number;
}

export class Prefetches {
  private readonly all = new Map<string, Prefetch>();
  private readonly forgotten = new Set<string>();

  constructor(
    private readonly host: PrefetchHost,
    private readonly idleMs = defaultPrefetchIdleMs,
  ) {}

  /** A notice from device `from`: its chunks are fetched when its name and size may sync here. */
  notice(from: string, notice: BlobNotice): void {
    const key = `${from}\n${notice.upload}`;
    if (this.forgotten.has(key) || !this.allowed(notice)) return;
    let prefetch = this.all.get(key);
    if (
      prefetch !== undefined &&
      (prefetch.path !== notice.path || prefetch.size !== notice.size)
    ) {
      return;
    }
    prefetch ??= this.start(key, from, notice);
    if (prefetch === undefined) return;
    prefetch.idle.refresh();
    for (const chunk of notice.chunks) {
      if (chunk.offset + chunk.size > notice.size || isNamed(prefetch, chunk)) continue;
      prefetch.named.set(chunk.offset, chunk);
      prefetch.queued.push(chunk);
    }
    this.pump(prefetch);
  }

  /**
   * The prefetch for `version` at `path`, once its fetches settled: the caller owns its
   * temporary file from now on. Undefined when none was told of any of its chunks. One of
   * `path` itself first, else one of another name in its folder (a version that became a
   * conflict copy while it went up: its temporary file is beside that name too); among those,
   * the one told of most of the version's chunks.
   */
  async claim(
    path: string,
    version: { chunks: ChunkList; size: number },
  ): Promise<Claimed | undefined> {
    let best: { prefetch: Prefetch; rank: number } | undefined;
    for (const prefetch of this.all.values()) {
      if (prefetch.size !== version.size || dirname(prefetch.path) !== dirname(path)) continue;
      const matches = resumeOf(prefetch.named, prefetch, version.chunks).resume.present.size;
      if (matches === 0) continue;
      const rank = matches + (prefetch.path === path ? version.chunks.length : 0);
      if (rank > (best?.rank ?? 0)) best = { prefetch, rank };
    }
    if (best === undefined) return undefined;
    const { prefetch } = best;
    this.forget(prefetch);
    prefetch.queued = [];
    await prefetch.running?.catch(() => undefined);
    return {
      ...resumeOf(prefetch.written, prefetch, version.chunks),
      temp: prefetch.temp,
      ino: prefetch.ino,
    };
  }

  /** Drops every prefetch and its file (the sync stops). */
  close(): void {
    for (const prefetch of this.all.values()) this.drop(prefetch);
  }

  private allowed(notice: BlobNotice): boolean {
    return (
      pathProblem(notice.path) === undefined &&
      !this.host.ignores(notice.path) &&
      notice.size <= this.host.maxFileBytes()
    );
  }

  /**
   * A new upload of `from`. Its earlier upload of the same path is over (a device sends one file
   * at a time; a file read while it was still being written goes again): its prefetch is carried
   * on. Else a prefetch starts, and its oldest one goes when it has `maxPrefetchesPerSender`.
   */
  private start(key: string, from: string, notice: BlobNotice): Prefetch | undefined {
    const senders = [...this.all.values()].filter((prefetch) => prefetch.from === from);
    const earlier = senders.find((prefetch) => prefetch.path === notice.path);
    if (earlier !== undefined) return this.carry(earlier, key, notice);
    if (senders.length >= maxPrefetchesPerSender) this.drop(senders[0]!);
    const made = this.host.disk.writeTemp(notice.path, '', { makeFolders: false });
    if ('problem' in made) return undefined;
    this.host.busyTemps.add(made.temp);
    const idle = setTimeout(() => this.drop(prefetch), this.idleMs);
    idle.unref();
    const prefetch: Prefetch = {
      key,
      from,
      upload: notice.upload,
      path: notice.path,
      size: notice.size,
      temp: made.temp,
      ino: made.ino,
      written: new Map(),
      named: new Map(),
      carried: new Set(),
      hash: createHash('sha256'),
      hashedBytes: 0,
      queued: [],
      running: undefined,
      idle,
    };
    this.all.set(key, prefetch);
    return prefetch;
  }

  /**
   * `prefetch` goes on as the prefetch of the newer upload `key`: its file, the chunks it wrote
   * and those it fetches stay; an offset it named is fetched again only when the new upload
   * names another chunk there (see `isNamed`).
   */
  private carry(prefetch: Prefetch, key: string, notice: BlobNotice): Prefetch {
    this.all.delete(prefetch.key);
    this.remember(prefetch.key);
    prefetch.key = key;
    prefetch.upload = notice.upload;
    prefetch.size = notice.size;
    prefetch.carried = new Set(prefetch.named.keys());
    prefetch.queued = prefetch.queued.filter((chunk) => chunk.offset + chunk.size <= notice.size);
    this.all.set(key, prefetch);
    return prefetch;
  }

  /**
   * Fetches what is queued, all of it at each turn (one transfer window for the lot). Chunks
   * queued after the loop found the queue empty, but before the run was over, get a run of
   * their own: else they waited for the next notice, maybe the last one already.
   */
  private pump(prefetch: Prefetch): void {
    if (prefetch.running !== undefined) return;
    prefetch.running = (async () => {
      while (prefetch.queued.length > 0 && this.isLive(prefetch)) {
        const batch = prefetch.queued.splice(0);
        const transfer = this.host.transfer();
        if (transfer === undefined) throw new Error('not connected');
        const temp = join(this.host.dir, prefetch.temp);
        await transfer.fetchInto(
          batch,
          temp,
          (chunk, plain) => {
            prefetch.written.set(chunk.offset, chunk);
            if (chunk.offset < prefetch.hashedBytes) {
              // another chunk over hashed bytes (a carried prefetch): the download hashes anew
              prefetch.hash = createHash('sha256');
              prefetch.hashedBytes = 0;
            }
            if (chunk.offset !== prefetch.hashedBytes) return;
            prefetch.hash.update(plain);
            prefetch.hashedBytes += plain.length;
          },
          prefetch.ino,
        );
      }
    })()
      .catch(() => {
        if (this.isLive(prefetch)) this.drop(prefetch);
      })
      .finally(() => {
        prefetch.running = undefined;
        if (prefetch.queued.length > 0 && this.isLive(prefetch)) this.pump(prefetch);
      });
  }

  /** Still a prefetch here: neither claimed nor dropped. */
  private isLive(prefetch: Prefetch): boolean {
    return this.all.get(prefetch.key) === prefetch;
  }

  private drop(prefetch: Prefetch): void {
    this.forget(prefetch);
    // Removed now even while a fetch writes to it: that fetch opened it by name and ends on it.
    this.host.disk.removeQuietly(prefetch.temp);
    this.host.busyTemps.delete(prefetch.temp);
  }

  private forget(prefetch: Prefetch): void {
    clearTimeout(prefetch.idle);
    this.all.delete(prefetch.key);
    this.remember(prefetch.key);
  }

  /** Late notices of upload `key` start nothing. */
  private remember(key: string): void {
    this.forgotten.add(key);
    if (this.forgotten.size > maxForgotten) {
      this.forgotten.delete(this.forgotten.values().next().value!);
    }
  }
}

/**
 * Whether `chunk`'s offset is fetched or queued already: an offset is fetched once (a repeated
 * notice, or a hostile one naming it again), but one an earlier upload named (`carried`) is
 * fetched once more when this upload names another chunk there.
 */
function isNamed(prefetch: Prefetch, chunk: PlacedChunk): boolean {
  const known = prefetch.named.get(chunk.offset);
  if (known === undefined) return false;
  if (!prefetch.carried.delete(chunk.offset)) return true;
  return known.id === chunk.id && known.size === chunk.size;
}

/**
 * Which of `chunks` (by index) `held` has at their place (a prefetch's chunks written, or also
 * queued), and their bytes; the prefetch's hash goes with them while every chunk it covers is
 * one of those (else the download hashes from 0).
 */
function resumeOf(
  held: Map<number, PlacedChunk>,
  prefetch: Prefetch,
  chunks: ChunkList,
): Omit<Claimed, 'temp' | 'ino'> {
  const present = new Set<number>();
  let offset = 0;
  let bytes = 0;
  let prefixHolds = true;
  for (const [index, [id, size]] of chunks.entries()) {
    const chunk = held.get(offset);
    if (chunk?.id === id && chunk.size === size) {
      present.add(index);
      bytes += size;
    } else if (offset < prefetch.hashedBytes) prefixHolds = false;
    offset += size;
  }
  const hashed = prefixHolds
    ? { hash: prefetch.hash, hashedBytes: prefetch.hashedBytes }
    : { hash: createHash('sha256'), hashedBytes: 0 };
  return { resume: { present, ...hashed }, bytes };
}
