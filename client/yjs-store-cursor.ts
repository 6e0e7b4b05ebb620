import * as decoding from 'lib0/decoding';
import * as sync from 'y-protocols/sync';
import { HostSummary, type HostSummaryData } from './yjs-host-summary.ts';

/** What a device keeps between runs of one document's place on the host (JSON). */
export interface StoreProgress {
  /** The document's name on the host (a digest when encrypted): another one starts afresh. */
  doc?: string;
  /** The last position of the host's entries this device has applied. */
  position: number;
  /** What the host holds of the document, as far as this device knows. */
  host: HostSummaryData;
}

/** Entries (or bytes of them) since the last snapshot past which the device writes one. */
export const snapshotAfterEntries = 200;
export const snapshotAfterBytes = 1_048_576;
/** Entries after which the state is measured again, at least (see `wouldWantSnapshot`). */
const remeasureAfterEntries = 16;

/**
 * One document's place on the host, shared by the providers a device opens on it one after
 * the other (one per connection): the last position applied, what the host holds (so an edit
 * made offline is sent at the next connection, and nothing more), and how much the host has
 * kept since the last snapshot.
 */
export class StoreCursor {
  position: number;
  host: HostSummary;
  /** The document's name on the host, set by the first provider. */
  doc: string | undefined;
  /** Entries and their bytes the host keeps beyond the last snapshot (as far as seen here). */
  sinceSnapshot = { entries: 0, bytes: 0 };
  /** Where the entries since the last snapshot are weighed against the state again. */
  #weighAt: { bytes: number; entries: number } | undefined;

  constructor(progress?: StoreProgress) {
    this.doc = progress?.doc;
    this.position = progress?.position ?? 0;
    this.host = new HostSummary(progress?.host);
  }

  /**
   * Binds the cursor to the document `doc` (its name on the host); a place recorded for
   * another name (the passphrase changed, or encryption was turned on) is forgotten.
   */
  bind(doc: string): void {
    if (this.doc === doc) return;
    if (this.doc !== undefined) {
      this.position = 0;
      this.host = new HostSummary();
      this.restartSnapshotCount();
    }
    this.doc = doc;
  }

  /**
   * Whether the host keeps enough beyond the last snapshot for a new one to be worth it;
   * `stateBytes` measures the document's whole state (asked only past 1 MiB, see below).
   */
  wantsSnapshot(stateBytes: () => number): boolean {
    return this.wouldWantSnapshot(0, stateBytes);
  }

  /**
   * Whether one more entry of `bytes` bytes would make a snapshot worth it: past 200 entries,
   * or past 1 MiB once the entries weigh twice the document's whole state (a snapshot is that
   * state: one written right after a large edit would cost as much again as the edit and stand
   * for nothing more). When they weigh less, the state is measured again only once they pass
   * twice the state measured or the entries doubled, 16 more at least (an edit that deletes
   * much is small), so it is encoded a handful of times between two snapshots, not at every
   * entry of a large document (measuring a folder of 10,000 notes encodes some 40 MB).
   */
  wouldWantSnapshot(bytes: number, stateBytes: () => number): boolean {
    const since = this.sinceSnapshot;
    const entries = since.entries + (bytes > 0 ? 1 : 0);
    if (entries > snapshotAfterEntries) return true;
    const total = since.bytes + bytes;
    if (total <= snapshotAfterBytes) return false;
    const weighAt = this.#weighAt;
    if (weighAt !== undefined && total < weighAt.bytes && entries < weighAt.entries) return false;
    const twice = 2 * stateBytes();
    if (total >= twice) return true;
    this.#weighAt = {
      bytes: twice,
      entries: Math.max(entries + remeasureAfterEntries, 2 * entries),
    };
    return false;
  }

  /** A snapshot was written (or seen, or put off): the count starts again. */
  restartSnapshotCount(): void {
    this.sinceSnapshot = { entries: 0, bytes: 0 };
    this.#weighAt = undefined;
  }

  /** The host keeps one more entry of `bytes` bytes beyond the last snapshot. */
  counted(bytes: number): void {
    this.sinceSnapshot.entries += 1;
    this.sinceSnapshot.bytes += bytes;
  }

  progress(): StoreProgress {
    return {
      ...(this.doc === undefined ? {} : { doc: this.doc }),
      position: this.position,
      host: this.host.toJSON(),
    };
  }
}

/**
 * The Yjs update in a stored message (a y-protocols update or sync step 2, what the provider
 * appends), or undefined when the bytes are no such message.
 */
export function storedUpdate(body: Uint8Array): Uint8Array | undefined {
  try {
    const decoder = decoding.createDecoder(body);
    if (decoding.readVarUint(decoder) !== 0) return undefined;
    const type = decoding.readVarUint(decoder);
    if (type !== sync.messageYjsUpdate && type !== sync.messageYjsSyncStep2) return undefined;
    return decoding.readVarUint8Array(decoder);
  } catch {
    return undefined; // cut short: not a message of ours
  }
}
