import { mkdirSync, readdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
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
 * Files are written and read on the thread pool, never on the relay's thread: a disk that makes
 * writes wait (a NAS's, behind a large upload) holds up that put alone, not every room.
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

  /**
   * Writes `data` under a new number, returned once written; rejects when the file cannot be
   * written (what was written of it is removed).
   */
  async write(data: Uint8Array): Promise<number> {
    const n = this.#next++;
    const path = this.#pathOf(n);
    try {
      try {
        await writeFile(path, data, { mode: privateFile });
      } catch (err: unknown) {
        // Its subfolder is made by the first write into it (or again, if removed meanwhile).
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        await mkdir(dirname(path), { recursive: true, mode: privateFolder });
        await writeFile(path, data, { mode: privateFile });
      }
    } catch (err: unknown) {
      this.remove([n]);
      throw err;
    }
    return n;
  }

  /** File `n`'s bytes; undefined when it is gone or is not `size` bytes long (a damaged copy). */
  async read(n: number, size: number): Promise<Buffer | undefined> {
    return sized(await missingAsUndefined(readFile(this.#pathOf(n))), size);
  }

  /** `read` at once, for a caller that decides inside a transaction. */
  readNow(n: number, size: number): Buffer | undefined {
    let data: Buffer | undefined;
    try {
      data = readFileSync(this.#pathOf(n));
    } catch (err: unknown) {
      data = undefinedIfMissing(err);
    }
    return sized(data, size);
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

const sized = (data: Buffer | undefined, size: number) =>
  data?.length === size ? data : undefined;

/** Undefined for a file that is not there; any other error is thrown. */
function undefinedIfMissing(err: unknown): undefined {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
  throw err;
}

const missingAsUndefined = (read: Promise<Buffer>) => read.catch(undefinedIfMissing);
