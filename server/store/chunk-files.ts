import { mkdirSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Files per subfolder of `chunks/`: no folder holds hundreds of thousands of entries. */
const filesPerFolder = 1000;

const numbered = /^(0|[1-9][0-9]*)$/;

/** Chunk files and their folders are the host's alone, as the data folder's other files. */
const privateFile = 0o600;
const privateFolder = 0o700;

/**
 * The bytes of store.db's chunks, one file per chunk under a `chunks/` folder beside store.db:
 * chunk file `n` is `chunks/<floor(n / 1000)>/<n>`. The number is kept in the chunk's row
 * (`chunks.file`), never its rowid, which a VACUUM may renumber. Numbers count up from the
 * highest a row names at open; a number is never given twice while the store is open.
 *
 * No write is fsync'ed: a file is written before the commit of its row, and both survive a
 * kill -9 of the process (the kernel holds them), as store.db's WAL commits (synchronous=NORMAL)
 * do. After a power loss a row may name a file that is short or gone; a read treats it as a
 * missing chunk, which the devices put again.
 */
export class ChunkFiles {
  readonly #folder: string;
  #next: number;

  /**
   * Opens the folder (created when absent) and removes the number-named files that no row names
   * (`named`, the numbers the rows name; the highest gives the next number): the file of a put
   * whose row was never committed (a crash between the two). Anything else is left alone.
   */
  constructor(folder: string, named: ReadonlySet<number>) {
    this.#folder = folder;
    mkdirSync(folder, { recursive: true, mode: privateFolder });
    let highest = -1;
    for (const n of named) if (n > highest) highest = n;
    this.#next = highest + 1;
    this.#removeOrphans(named);
  }

  #removeOrphans(named: ReadonlySet<number>): void {
    for (const folder of readdirSync(this.#folder, { withFileTypes: true })) {
      if (!folder.isDirectory() || !numbered.test(folder.name)) continue;
      const base = Number(folder.name);
      const path = join(this.#folder, folder.name);
      for (const file of readdirSync(path, { withFileTypes: true })) {
        if (!file.isFile() || !numbered.test(file.name)) continue;
        const n = Number(file.name);
        if (named.has(n) && Math.floor(n / filesPerFolder) === base) continue;
        unlinkSync(join(path, file.name));
      }
    }
  }

  #pathOf(n: number): string {
    return join(this.#folder, String(Math.floor(n / filesPerFolder)), String(n));
  }

  /** Writes `data` under a new number, returned; throws when the file cannot be written. */
  write(data: Uint8Array): number {
    const n = this.#next++;
    const path = this.#pathOf(n);
    try {
      writeFileSync(path, data, { mode: privateFile });
    } catch (err: unknown) {
      // Its subfolder is made by the first write into it (or again, if removed meanwhile).
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      mkdirSync(dirname(path), { recursive: true, mode: privateFolder });
      writeFileSync(path, data, { mode: privateFile });
    }
    return n;
  }

  /** File `n`'s bytes; undefined when it is gone or is not `size` bytes long (a damaged copy). */
  read(n: number, size: number): Buffer | undefined {
    let data: Buffer;
    try {
      data = readFileSync(this.#pathOf(n));
    } catch (err: unknown) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    return data.length === size ? data : undefined;
  }

  /** Whether file `n` is there at `size` bytes (not gone, nor cut short). */
  holds(n: number, size: number): boolean {
    return statSync(this.#pathOf(n), { throwIfNoEntry: false })?.size === size;
  }

  /**
   * Removes files whose rows are deleted (committed). One that cannot be removed now (gone
   * already, or a failing disk) is an orphan: the next open removes it, so the delete, already
   * committed, does not fail for it.
   */
  remove(numbers: Iterable<number>): void {
    for (const n of numbers) {
      try {
        unlinkSync(this.#pathOf(n));
      } catch {
        // Left for the sweep at the next open (see above).
      }
    }
  }
}
