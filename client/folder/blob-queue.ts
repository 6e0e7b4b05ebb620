import { join } from 'node:path';
import { hashFile } from '../chunks/index.ts';
import { SyncError } from '../errors.ts';
import type { BlobTransfer, ChunkList } from './blob-transfer.ts';
import { type Disk, type Stamp, sameStamp } from './disk.ts';
import type { BlobVersion } from './document.ts';
import { Prefetches } from './prefetch.ts';

/**
 * Files that are not text (binary, or text over 1 MiB) travel as chunks the host keeps: this
 * module moves them, a few uploads and a few downloads at a time (`maxRunning` each way: a small
 * file's transfer is mostly round trips, and one at a time left the connection idle), beside
 * the folder sync's synchronous reads and writes. An upload reads the file as it is, sends the chunks the host
 * lacks, and only then is the version published in the folder document (a device that comes
 * later can always fetch it). A download goes into a temporary file beside its target, is
 * checked against the version's SHA-256, and is then handed to the writer, which puts it in
 * place like any write. A `store_full` host leaves the file waiting (said once, in `status`
 * too) and tried again later; so does a connection that is down.
 */

/** What the queue needs of the folder sync. */
export interface BlobHost {
  /** The folder's path (downloads write their temporary files through it). */
  readonly dir: string;
  /** The folder's files (disk.ts). */
  readonly disk: Disk;
  /** The transfer on the current connection; undefined while there is none. */
  transfer(): BlobTransfer | undefined;
  /** The digest the disk record of `path` has (undefined when the file is new here). */
  recordDigest(path: string): string | undefined;
  /** An uploaded file, still as it was read: its version goes in the folder document. */
  publish(
    path: string,
    stamp: Stamp,
    file: { chunks: ChunkList; size: number; digest: string },
  ): void;
  /** A file read again and found unchanged (only its stamp moved). */
  unchanged(path: string, stamp: Stamp): void;
  /** Whether `.syncignore` keeps `path` on this device now (then it is not sent). */
  ignores(path: string): boolean;
  /** Whether the version is still the one the folder should have at `path`. */
  wanted(path: string, version: string): boolean;
  /** A download is ready (or gave up for now): the writer looks at `path` again. */
  downloaded(path: string): void;
  /** Files larger than this are not synced. */
  maxFileBytes(): number;
  /** How long a prefetch no notice touched is kept (prefetch.ts; 5 minutes). */
  prefetchIdleMs?: number;
  say(kind: 'out' | 'problem', line: string): void;
  sayOnce(key: string, line: string): boolean;
  unsay(key: string): void;
}

interface Upload {
  stamp: Stamp;
}
interface Download {
  version: BlobVersion;
  temp?: string;
  ready: boolean;
}

/** A transfer in progress, for the progress line. */
export interface Transfer {
  path: string;
  direction: 'up' | 'down';
  doneBytes: number;
  totalBytes: number;
  startedAt: number;
}

/**
 * Transfers running at once in each direction. Each keeps its own window of chunks in flight
 * (2 MiB), and the relay paces its answers to what the receiver reads.
 */
export const maxRunning = 4;
/** How long a file waits after a failed transfer before it is tried again. */
const retryMs = 5_000;
const storeFullRetryMs = 30_000;

export class BlobQueue {
  private readonly uploads = new Map<string, Upload>();
  private readonly downloads = new Map<string, Download>();
  /** Temporary files of downloads: the folder scan leaves them alone. */
  readonly busyTemps = new Set<string>();
  /** Set while the host refused a chunk with store_full (until an upload goes through). */
  storeFull = false;
  /** The transfers running now, by direction and path. */
  readonly active = new Map<string, Transfer>();
  /** The paths whose transfer runs now, in each direction. */
  private readonly running = { up: new Set<string>(), down: new Set<string>() };
  /** No new transfer starts in that direction until `resume` (disconnected, store full, failed). */
  private halted = { up: false, down: false };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  /** Chunks of files other devices are still sending, fetched ahead (the downloads take them). */
  readonly prefetches: Prefetches;

  constructor(private readonly host: BlobHost) {
    this.prefetches = new Prefetches(
      {
        dir: host.dir,
        disk: host.disk,
        transfer: () => host.transfer(),
        ignores: (path) => host.ignores(path),
        maxFileBytes: () => host.maxFileBytes(),
        busyTemps: this.busyTemps,
      },
      host.prefetchIdleMs,
    );
  }

  /** A file read here that is a blob: sent when its turn comes (again, if it changed since). */
  upload(path: string, stamp: Stamp): void {
    this.uploads.set(path, { stamp });
    this.pump('up');
  }

  /** Whether the file at `path`, as `stamp` says, waits to go up already. */
  uploading(path: string, stamp: Stamp): boolean {
    return sameStamp(this.uploads.get(path)?.stamp, stamp);
  }

  /** Whether a file read at `path` waits to go up. */
  sending(path: string): boolean {
    return this.uploads.has(path);
  }

  /** The folder needs `version` at `path`: a download is started unless one runs or is ready. */
  want(path: string, version: BlobVersion): void {
    const job = this.downloads.get(path);
    if (job?.version.v === version.v) return;
    if (job !== undefined) this.drop(path, job);
    this.downloads.set(path, { version, ready: false });
    this.pump('down');
  }

  /** Whether a download of `version` at `path` runs or waits (the budget was taken for it). */
  wants(path: string, version: string): boolean {
    return this.downloads.get(path)?.version.v === version;
  }

  /** The temporary file holding `version` at `path`, when its download is done; the writer's now. */
  take(path: string, version: string): string | undefined {
    const job = this.downloads.get(path);
    if (job === undefined || !job.ready || job.version.v !== version) return undefined;
    this.downloads.delete(path);
    this.busyTemps.delete(job.temp!);
    return job.temp;
  }

  /** Files and bytes waiting to go up, and to come down. */
  waiting(): { up: { files: number; bytes: number }; down: { files: number; bytes: number } } {
    const up = { files: this.uploads.size, bytes: 0 };
    for (const job of this.uploads.values()) up.bytes += job.stamp.size;
    const down = { files: this.downloads.size, bytes: 0 };
    for (const job of this.downloads.values()) down.bytes += job.version.size;
    return { up, down };
  }

  /** Tries what waits now (the connection is back). */
  resume(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.halted = { up: false, down: false };
    this.pump('up');
    this.pump('down');
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const [path, job] of this.downloads) this.drop(path, job);
    this.prefetches.close();
  }

  private drop(path: string, job: Download): void {
    this.downloads.delete(path);
    if (job.temp !== undefined && job.ready) {
      this.host.disk.removeQuietly(job.temp);
      this.busyTemps.delete(job.temp);
    }
    // A running one removes its temporary file when it ends (it is no longer in `downloads`).
  }

  private retryLater(ms: number): void {
    if (this.closed) return;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.resume();
    }, ms);
  }

  /** Starts transfers in `direction` while fewer than `maxRunning` run and files wait. */
  private pump(direction: 'up' | 'down'): void {
    const running = this.running[direction];
    while (!this.closed && !this.halted[direction] && running.size < maxRunning) {
      const path = direction === 'up' ? this.nextUploadPath() : this.nextDownloadPath();
      if (path === undefined) return;
      running.add(path);
      const work = direction === 'up' ? this.nextUpload(path) : this.nextDownload(path);
      work
        .then((more) => {
          running.delete(path);
          if (!more) this.halted[direction] = true;
          this.pump(direction);
        })
        .catch((err: unknown) => {
          running.delete(path);
          this.halted[direction] = true;
          this.host.say('problem', `problem: ${err instanceof Error ? err.message : String(err)}`);
          this.retryLater(retryMs);
        });
    }
  }

  /** The first file waiting to go up whose upload does not run yet. */
  private nextUploadPath(): string | undefined {
    for (const path of this.uploads.keys()) if (!this.running.up.has(path)) return path;
    return undefined;
  }

  /** The first wanted version whose download is neither done nor running. */
  private nextDownloadPath(): string | undefined {
    for (const [path, job] of this.downloads) {
      if (!job.ready && !this.running.down.has(path)) return path;
    }
    return undefined;
  }

  /** Sends the file waiting at `path`; whether to go on with the next. */
  private async nextUpload(path: string): Promise<boolean> {
    const transfer = this.host.transfer();
    const job = this.uploads.get(path);
    if (job === undefined) return true;
    if (transfer === undefined) {
      this.retryLater(retryMs);
      return false;
    }
    const { dir, disk } = this.host;
    const stillThere = () => {
      const now = disk.statFile(path);
      return now !== undefined && !('problem' in now) && sameStamp(now, job.stamp);
    };
    const finish = () => {
      if (this.uploads.get(path) === job) this.uploads.delete(path);
    };
    // Changed or gone since it was read (the scan reads it again), or ignored now.
    if (!stillThere() || this.host.ignores(path)) {
      finish();
      return true;
    }
    const known = this.host.recordDigest(path);
    const digest =
      known === undefined ? undefined : await hashFile(join(dir, path)).catch(() => '');
    if (known !== undefined && digest?.slice(0, 32) === known) {
      if (stillThere()) this.host.unchanged(path, job.stamp);
      finish();
      return true;
    }
    const progress = this.track('up', path, job.stamp.size);
    let file: Awaited<ReturnType<BlobTransfer['upload']>>;
    try {
      file = await transfer.upload(join(dir, path), progress, { path, size: job.stamp.size });
    } catch (err: unknown) {
      return this.failed(path, 'up', err);
    } finally {
      this.active.delete(`up ${path}`);
    }
    if (this.storeFull) {
      this.storeFull = false;
      this.host.unsay('store full');
      this.host.say('out', 'the host takes files again');
    }
    if (stillThere() && this.uploads.get(path) === job) this.host.publish(path, job.stamp, file);
    finish();
    return true;
  }

  /** Fetches the version wanted at `path`; whether to go on with the next. */
  private async nextDownload(path: string): Promise<boolean> {
    const transfer = this.host.transfer();
    const job = this.downloads.get(path);
    if (job === undefined || job.ready) return true;
    if (transfer === undefined) {
      this.retryLater(retryMs);
      return false;
    }
    if (!this.host.wanted(path, job.version.v)) {
      this.drop(path, job);
      return true;
    }
    const claimed = await this.prefetches.claim(path, job.version);
    const temp = claimed ?? this.host.disk.writeTemp(path, '');
    if ('problem' in temp) {
      // The writer says why when it tries the path; the download waits for the next try.
      this.downloads.delete(path);
      this.host.downloaded(path);
      return true;
    }
    job.temp = temp.temp;
    this.busyTemps.add(temp.temp);
    const progress = this.track('down', path, job.version.size);
    progress(claimed?.bytes ?? 0);
    const keep = () => this.downloads.get(path) === job;
    try {
      const got = await transfer.download(
        job.version.chunks,
        join(this.host.dir, temp.temp),
        progress,
        claimed?.resume,
        temp.ino,
      );
      if (got.digest !== job.version.digest || got.size !== job.version.size) {
        throw new Error(`${path} did not come out as its version says (fetched again)`);
      }
    } catch (err: unknown) {
      this.host.disk.removeQuietly(temp.temp);
      this.busyTemps.delete(temp.temp);
      job.temp = undefined;
      return keep() ? this.failed(path, 'down', err) : true;
    } finally {
      this.active.delete(`down ${path}`);
    }
    if (!keep()) {
      this.host.disk.removeQuietly(temp.temp);
      this.busyTemps.delete(temp.temp);
      return true;
    }
    job.ready = true;
    this.host.downloaded(path);
    return true;
  }

  private track(direction: 'up' | 'down', path: string, totalBytes: number) {
    const transfer: Transfer = { path, direction, doneBytes: 0, totalBytes, startedAt: Date.now() };
    this.active.set(`${direction} ${path}`, transfer);
    return (n: number) => {
      transfer.doneBytes += n;
    };
  }

  /** A transfer that failed: the file waits; whether to go on with the next now. */
  private failed(path: string, direction: 'up' | 'down', err: unknown): boolean {
    const code = err instanceof SyncError ? err.code : undefined;
    const message = err instanceof Error ? err.message : String(err);
    if (code === 'store_full') {
      this.storeFull = true;
      this.host.sayOnce(
        'store full',
        `the host's store is full: ${path} and the files after it wait to go up (tried again every ${storeFullRetryMs / 1000} s)`,
      );
      this.retryLater(storeFullRetryMs);
      return false;
    }
    if (code === 'forbidden' && direction === 'up') {
      // A viewer of a shared project: nothing it has goes up; the file stays here as it is.
      this.uploads.delete(path);
      this.host.sayOnce(
        'viewer',
        `this device's user is a viewer of the project: files changed here stay here (${path} first)`,
      );
      return true;
    }
    if (code === 'closed' || code === 'not_joined') {
      // Disconnected: tried again when the connection is back (and every few seconds).
      this.retryLater(retryMs);
      return false;
    }
    const what = direction === 'up' ? 'sent' : 'received';
    this.host.sayOnce(
      `${direction} ${path} ${message}`,
      `not ${what} ${path}: ${message}; trying again`,
    );
    this.retryLater(retryMs);
    return false;
  }
}
