import { readFileSync } from 'node:fs';
import type { Logger } from './log.ts';

/**
 * The process's budget of connections not yet trusted: the relay's connections that have not
 * joined a room and the open connections of the auth and status ports, whichever port they came
 * to. It keeps their descriptors well below the process's limit, leaving the rest for joined
 * devices, the database and store files and the listeners. When it is full a new connection is
 * still let in: the oldest connection of the address that holds the most is closed (evicted) to
 * make room. So a client from a new address always gets in, and while the budget is contended
 * no address keeps more than the others (among addresses that hold as many, the one that
 * reached that count first loses one). Addresses are keyed as the per-address caps key them
 * (server/address-cap.ts: an IPv6 address by its /64).
 */
export interface ConnectionBudget {
  /** How many connections it holds at most. */
  readonly size: number;
  /** How many it holds now. */
  readonly held: number;
  /** Connections closed to make room, since the start. */
  readonly evicted: number;
  /**
   * Counts `holder` for the address `key`. When the budget is full, first evicts one: removed
   * from the budget, then `evict` of its own `take` is called (which closes it).
   */
  take(key: string, holder: object, evict: () => void): void;
  /** `holder` no longer counts (closed, or trusted); nothing when it is not counted. */
  release(holder: object): void;
}

interface Held {
  key: string;
  evict: () => void;
}

export function createConnectionBudget(size: number): ConnectionBudget {
  if (!Number.isInteger(size) || size < 1) throw new Error(`connection budget ${size}: not ≥ 1`);
  const holders = new Map<object, Held>();
  /** Each address's holders, oldest first. */
  const byAddress = new Map<string, Set<object>>();
  /** The addresses by how many they hold: `counts[n]` holds n, in the order they reached n. */
  const counts: Array<Set<string>> = [];
  let most = 0;
  let evicted = 0;

  function move(key: string, from: number, to: number): void {
    counts[from]?.delete(key);
    if (to > 0) {
      let set = counts[to];
      if (set === undefined) {
        set = new Set();
        counts[to] = set;
      }
      set.add(key);
    }
    if (to > most) most = to;
    while (most > 0 && (counts[most]?.size ?? 0) === 0) most--;
  }

  function release(holder: object): void {
    const held = holders.get(holder);
    if (held === undefined) return;
    holders.delete(holder);
    const own = byAddress.get(held.key) as Set<object>;
    own.delete(holder);
    move(held.key, own.size + 1, own.size);
    if (own.size === 0) byAddress.delete(held.key);
  }

  /** Closes the oldest holder of the address that holds the most. */
  function evictOne(): void {
    const key = counts[most]?.values().next().value as string;
    const oldest = byAddress.get(key)?.values().next().value as object;
    const { evict } = holders.get(oldest) as Held;
    release(oldest);
    evicted++;
    evict();
  }

  return {
    size,
    get held() {
      return holders.size;
    },
    get evicted() {
      return evicted;
    },
    take(key, holder, evict) {
      if (holders.has(holder)) return;
      if (holders.size >= size) evictOne();
      holders.set(holder, { key, evict });
      let own = byAddress.get(key);
      if (own === undefined) {
        own = new Set();
        byAddress.set(key, own);
      }
      own.add(holder);
      move(key, own.size - 1, own.size);
    },
    release,
  };
}

/** The budget where the descriptor limit cannot be read: half of the common 1,024. */
export const fallbackConnectionBudget = 512;

/**
 * The soft limit on open files of this process ("Max open files" in /proc/self/limits; node
 * raises it to the hard limit at start), or undefined where it cannot be read or is unlimited.
 */
export function descriptorLimit(limitsFile = '/proc/self/limits'): number | undefined {
  let text: string;
  try {
    text = readFileSync(limitsFile, 'utf8');
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+)\s/m.exec(text)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

/**
 * The budget's size for a descriptor limit: half of it (the other half for joined devices,
 * files and listeners), or 512 where the limit is unknown.
 */
export function connectionBudgetSize(limit: number | undefined): number {
  return limit === undefined ? fallbackConnectionBudget : Math.max(1, Math.floor(limit / 2));
}

/** The process's budget, sized from its descriptor limit (the figure logged at debug level). */
export function openConnectionBudget(logger: Logger): ConnectionBudget {
  const limit = descriptorLimit();
  const size = connectionBudgetSize(limit);
  logger.debug(
    { descriptorLimit: limit ?? 'unknown', connectionBudget: size },
    'connection budget: untrusted connections held at most (half the descriptor limit)',
  );
  return createConnectionBudget(size);
}

/** A budget of its own for one server built alone (a library user's, a test's). */
export function ownConnectionBudget(): ConnectionBudget {
  return createConnectionBudget(connectionBudgetSize(descriptorLimit()));
}
