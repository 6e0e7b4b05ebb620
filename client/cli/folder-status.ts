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

  get summary(): Waiting {
    let bytes = 0;
    for (const change of this.waiting.values()) bytes += change.bytes;
    return { files: this.waiting.size, bytes };
  }
}

/** The part of a name that marks a conflict copy (see `conflictName`). */
export const conflictPattern = /\.sync-conflict-\d{8}-\d{6}-[A-Za-z0-9_-]+(\.[^/]*)?$/;
