import * as Y from 'yjs';
import { isRelayErrorCode } from '../protocol/relay-codes.ts';
import { docKeyOf } from './doc-key.ts';
import type { E2EKey } from './e2e-key.ts';
import { SyncError } from './errors.ts';
import type { RelayConnection } from './relay-connection.ts';
import type { StoredEntry } from './store-frames.ts';
import { defaultMaxReceiveBytes } from './yjs-provider.ts';
import { Reassembler } from './yjs-reassembler.ts';
import { StoreCursor, storedUpdate } from './yjs-store-cursor.ts';
import { unseal } from './yjs-wire.ts';

/** One update of a document as the host keeps it: when it was stored and by which device. */
export interface HistoryEntry {
  pos: number;
  at: number;
  from: string;
  update: Uint8Array;
}

/**
 * Every entry the host still keeps of document `name`, in order, opened with `key` (undefined:
 * not encrypted): the raw entries (`catchup` with `"snapshots":false`), so a device can rebuild
 * the document as it was at any moment the host's history still covers. Entries that cannot be
 * opened (another passphrase, broken) are left out and counted in `skipped`. The connection must
 * be joined and no provider of the document may run on it meanwhile. Rejects with
 * `store_unavailable` when the host keeps no documents.
 */
export async function fetchHistory(
  connection: RelayConnection,
  name: string,
  key: E2EKey | undefined,
): Promise<{ entries: HistoryEntry[]; last: number; skipped: number }> {
  const { raw, last } = await storedEntries(connection, docKeyOf(name, key), key);
  const reassembler = new Reassembler({
    check: key?.check,
    maxMessageBytes: defaultMaxReceiveBytes,
    maxHeldBytes: defaultMaxReceiveBytes,
    onDrop: () => undefined,
  });
  const entries: HistoryEntry[] = [];
  let skipped = 0;
  for (const entry of raw) {
    const assembled = reassembler.accept(entry.from, {
      y: 1,
      doc: name,
      d: entry.data,
      ...(entry.kc === undefined ? {} : { kc: entry.kc }),
      ...(entry.part === undefined ? {} : { m: entry.part.m, i: entry.part.i, n: entry.part.n }),
    });
    if (assembled.kind === 'partial') continue;
    const opened =
      assembled.kind === 'whole' ? await unseal(key, name, entry.from, assembled) : undefined;
    const update = opened !== undefined && 'body' in opened ? storedUpdate(opened.body) : undefined;
    if (update === undefined) skipped += 1;
    else entries.push({ pos: entry.pos, at: entry.at, from: entry.from, update });
  }
  return { entries, last, skipped };
}

/** The document as it was at `at` (ms; every entry when undefined), from `fetchHistory`'s entries. */
export function documentAt(entries: HistoryEntry[], at?: number): Y.Doc {
  const doc = new Y.Doc();
  const kept = entries.filter((entry) => at === undefined || entry.at <= at);
  if (kept.length > 0) Y.applyUpdate(doc, Y.mergeUpdates(kept.map((entry) => entry.update)));
  return doc;
}

/**
 * A place on the host for a provider of the document rebuilt from all of `entries` (the host's
 * last position `last`): its catch-up then asks only for what came after.
 */
export function cursorAfter(entries: HistoryEntry[], last: number, doc: string): StoreCursor {
  const cursor = new StoreCursor({ doc, position: last, host: { v: {}, d: {} } });
  for (const entry of entries) cursor.host.add(entry.update);
  return cursor;
}

/**
 * Every entry the host keeps of the document stored as `doc` (its doc key), raw: each with the
 * key check value it was sealed under (`catchup` with `"snapshots":false`), and the host's last
 * position; with `keys`, the key check values of every entry the host keeps in the room (`kcs`,
 * undefined from a host that does not name them). Rejects with the store's error
 * (`store_unavailable`...) or when the connection ends.
 */
export async function storedEntries(
  connection: RelayConnection,
  doc: string,
  key: E2EKey | undefined,
  options: { keys?: boolean } = {},
): Promise<{ raw: StoredEntry[]; last: number; kcs?: string[] | undefined }> {
  const raw: StoredEntry[] = [];
  let kcs: string[] | undefined;
  const last = await new Promise<number>((resolve, reject) => {
    const stops = [
      connection.on('store', (frame) => {
        if (frame.doc !== doc) return;
        if (frame.type === 'stored') raw.push(...frame.entries);
        else if (frame.type === 'caughtup') {
          kcs = frame.kcs;
          done(() => resolve(frame.pos));
        } else if (frame.type === 'error')
          done(() =>
            reject(
              new SyncError(
                isRelayErrorCode(frame.code) ? frame.code : 'relay_error',
                frame.message,
              ),
            ),
          );
      }),
      connection.on('close', () =>
        done(() => reject(new SyncError('closed', 'the connection ended during the catch-up'))),
      ),
    ];
    const done = (then: () => void) => {
      for (const stop of stops) stop();
      then();
    };
    connection.sendStoreFrame({
      type: 'catchup',
      doc,
      after: 0,
      snapshots: false,
      ...(key === undefined ? {} : { kc: key.check }),
      ...(options.keys === true ? { keys: true } : {}),
    });
  });
  return { raw, last, kcs };
}
