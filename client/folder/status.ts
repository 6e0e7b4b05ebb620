import { conflictPattern } from './conflicts.ts';
import type { EntryIndex } from './entry-index.ts';
import type { FolderMirror } from './mirror.ts';

/** Files and bytes, as `sync-host status` shows what waits to go up or down. */
export interface Waiting {
  files: number;
  bytes: number;
}

/**
 * The files read here whose change the relay has not confirmed yet: each change gets a
 * generation; `mark()` before a flush and `confirmed(mark)` once the relay confirmed it drop
 * what was sent by then (a file changed again meanwhile stays).
 */
export class UnconfirmedFiles {
  private generation = 0;
  private readonly waiting = new Map<string, { bytes: number; generation: number }>();

  changed(path: string, bytes: number): void {
    this.generation += 1;
    this.waiting.set(path, { bytes, generation: this.generation });
  }

  /** The generation a flush started now confirms; undefined when nothing waits. */
  mark(): number | undefined {
    return this.waiting.size === 0 ? undefined : this.generation;
  }

  confirmed(mark: number): void {
    for (const [path, change] of this.waiting) {
      if (change.generation <= mark) this.waiting.delete(path);
    }
  }

  /** The files changed here and not confirmed sent, by path. */
  paths(): string[] {
    return [...this.waiting.keys()].sort();
  }

  get summary(): Waiting {
    let bytes = 0;
    for (const change of this.waiting.values()) bytes += change.bytes;
    return { files: this.waiting.size, bytes };
  }
}

/**
 * What `sync-host status` shows of a folder: files waiting to be written here (held by the
 * receive limits, blocked, or being fetched) and to go up as chunks, the conflict copies, the
 * files here that do not sync, and whether the host's store refused chunks for being full.
 */
export function folderStatus(index: EntryIndex, mirror: FolderMirror) {
  const down: Waiting = { files: 0, bytes: 0 };
  const blobs = mirror.blobs?.waiting();
  for (const path of mirror.retries()) {
    const winner = index.winnerAt(path);
    if (winner === undefined || mirror.ignores(path)) continue;
    down.files += 1;
    down.bytes +=
      winner.text === undefined ? winner.blob!.size : Buffer.byteLength(winner.text.toString());
  }
  if (blobs !== undefined) {
    down.files += blobs.down.files;
    down.bytes += blobs.down.bytes;
  }
  const conflicts: string[] = [];
  for (const path of index.paths()) {
    if (conflictPattern.test(path) && index.winnerAt(path) !== undefined) {
      if (!mirror.ignores(path)) conflicts.push(path);
    }
  }
  return {
    waitingDown: down,
    /** Files read here that wait to go up as chunks (besides those the relay has not confirmed). */
    blobsUp: blobs?.up ?? { files: 0, bytes: 0 },
    conflicts: conflicts.sort(),
    skipped: mirror.skippedCount,
    storeFull: mirror.blobs?.storeFull ?? false,
  };
}

/** The live files of the folder document (those this device does not ignore), for a report. */
export function liveFiles(index: EntryIndex, mirror: FolderMirror) {
  const count = { files: 0, bytes: 0, names: [] as string[] };
  for (const path of index.paths()) {
    const winner = index.winnerAt(path);
    if (winner === undefined || mirror.ignores(path)) continue;
    count.files += 1;
    count.bytes +=
      winner.text === undefined ? winner.blob!.size : Buffer.byteLength(winner.text.toString());
    if (count.names.length < 2000) count.names.push(path);
  }
  return count;
}
