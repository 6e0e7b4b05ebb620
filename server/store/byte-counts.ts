import type BetterSqlite3 from 'better-sqlite3';
import type { StoreBounds } from './document-store.ts';

/** What a bound reads: the bytes counted in all and for one user. */
interface Counted {
  readonly total: number;
  of(user: string): number;
}

/**
 * The bytes store.db's documents, chunks and folder reports count against the store's bounds, per user and in
 * all: one owner for both stores, changed only through it. A batch of appends or puts changes a
 * `CountBatch` while its transaction runs, which `commit` applies once the transaction committed
 * (a batch rolled back is dropped); a committed delete gives its bytes back with `release`. A
 * user whose count reaches zero is forgotten.
 */
export class ByteCounts implements Counted {
  #total = 0;
  readonly #users = new Map<string, number>();

  get total(): number {
    return this.#total;
  }

  of(user: string): number {
    return this.#users.get(user) ?? 0;
  }

  /** Every user's count (a copy). */
  byUser(): Map<string, number> {
    return new Map(this.#users);
  }

  /** Counted again from the rows of documents, chunks and folder reports. */
  recount(db: BetterSqlite3.Database): void {
    this.#users.clear();
    this.#total = 0;
    const rows = db
      .prepare<[], { user: string; bytes: number }>(
        `SELECT user, sum(bytes) AS bytes FROM (
          SELECT user, bytes FROM documents UNION ALL SELECT user, bytes FROM chunks
          UNION ALL SELECT user, counted AS bytes FROM folderReports
        ) GROUP BY user`,
      )
      .all();
    for (const row of rows) this.#add(row.user, row.bytes);
  }

  /** A batch's changes, counted on top of these until `commit`. */
  batch(): CountBatch {
    return new CountBatch(this);
  }

  commit(batch: CountBatch): void {
    for (const [user, bytes] of batch.changes) this.#add(user, bytes);
  }

  /** The bytes of committed deletions, given back. */
  release(user: string, bytes: number): void {
    this.#add(user, -bytes);
  }

  #add(user: string, bytes: number): void {
    this.#total += bytes;
    const left = this.of(user) + bytes;
    if (left > 0) this.#users.set(user, left);
    else this.#users.delete(user);
  }
}

/** The counts as a batch under way changes them (see `ByteCounts.batch`). */
export class CountBatch implements Counted {
  readonly changes = new Map<string, number>();
  #change = 0;

  constructor(private readonly base: ByteCounts) {}

  get total(): number {
    return this.base.total + this.#change;
  }

  of(user: string): number {
    return this.base.of(user) + (this.changes.get(user) ?? 0);
  }

  add(user: string, bytes: number): void {
    this.changes.set(user, (this.changes.get(user) ?? 0) + bytes);
    this.#change += bytes;
  }
}

/** Which bound `bytes` more for `user` would pass, as `counts` stand; undefined when none. */
export function boundPassed(
  counts: Counted,
  bounds: StoreBounds,
  user: string,
  bytes: number,
): 'user' | 'store' | undefined {
  if (counts.of(user) + bytes > bounds.userMaxBytes) return 'user';
  if (counts.total + bytes > bounds.maxBytes) return 'store';
  return undefined;
}
