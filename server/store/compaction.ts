import type BetterSqlite3 from 'better-sqlite3';
import type { Piece } from '../../protocol/relay-frames.ts';
import type { CompactionReport } from './document-store.ts';

/**
 * What the host may drop of a document, given the snapshots the devices wrote (docs/store.md,
 * "Compaction and history"). A snapshot S (an entry with `covers`, sealed with the key whose
 * check value is its `kc`) stands for every entry E of the same document and the same `kc` with
 * `E.pos <= S.covers`. Such an E is dropped when the history no longer needs it:
 *
 * - S and E were stored in the same history step (`store.historyStepMinutes`) and that step is
 *   over: the step's state is S plus what follows it, so only moments inside the step are lost
 *   (the history is kept to within a step);
 * - or S is older than the history window (`store.historyDays`): nobody may ask for a moment
 *   before it any more.
 *
 * An entry marked `keep` (the device's version just before a delete) stays for the whole window
 * whatever covers it. A snapshot covering positions at or beyond its own is ignored (it cannot
 * stand for what comes after it), and one sent in pieces counts only once every piece is stored.
 * A snapshot never drops an entry of another `kc`, so a device with another key (another
 * passphrase, or none) cannot make the host drop what the others wrote; the newest entry of a
 * document is never covered, so its last position stays.
 *
 * The decision is made here, in one place, over the entries' metadata; each store reads the
 * entries of its documents that hold a snapshot and deletes what `droppableEntries` names.
 */

/** What compaction needs to know of one stored entry (never its data). */
export interface CompactionCandidate {
  /** The store's row id. */
  id: number;
  pos: number;
  /** When it was stored, ms. */
  at: number;
  kc?: string | undefined;
  covers?: number | undefined;
  part?: Piece | undefined;
  keep?: boolean | undefined;
}

/** The history rules, in ms: the window (`store.historyDays`) and its step. */
export interface HistoryRules {
  keepMs: number;
  stepMs: number;
}

/** The snapshots of one document that may stand for what they cover: whole, covering earlier positions. */
function usableSnapshots(entries: readonly CompactionCandidate[]): CompactionCandidate[] {
  const pieces = new Map<string, number>();
  const pieceKey = (e: CompactionCandidate) => `${e.kc ?? ''}\u0000${e.covers}\u0000${e.part?.m}`;
  for (const e of entries) {
    if (e.covers === undefined || e.part === undefined) continue;
    pieces.set(pieceKey(e), (pieces.get(pieceKey(e)) ?? 0) + 1);
  }
  return entries.filter(
    (s) =>
      s.covers !== undefined &&
      s.covers < s.pos &&
      (s.part === undefined || pieces.get(pieceKey(s)) === s.part.n),
  );
}

/**
 * The ids of the entries of ONE document (all of its entries, any order) that the history no
 * longer needs at `now` (ms), by the rules above.
 */
export function droppableEntries(
  entries: readonly CompactionCandidate[],
  now: number,
  history: HistoryRules,
): number[] {
  const snapshots = usableSnapshots(entries);
  if (snapshots.length === 0) return [];
  const stepMs = Math.max(1, Math.floor(history.stepMs));
  const stepOf = (at: number) => Math.floor(at / stepMs);
  const windowStart = now - history.keepMs;
  const currentStep = stepOf(now);
  const standsFor = (s: CompactionCandidate, e: CompactionCandidate) =>
    (s.kc ?? null) === (e.kc ?? null) &&
    s.pos > e.pos &&
    e.pos <= (s.covers as number) &&
    (s.at < windowStart || (stepOf(e.at) === stepOf(s.at) && stepOf(s.at) < currentStep));
  return entries
    .filter((e) => !(e.keep === true && e.at >= windowStart))
    .filter((e) => snapshots.some((s) => standsFor(s, e)))
    .map((e) => e.id);
}

interface CandidateRow {
  id: number;
  document: number;
  pos: number;
  at: number;
  kc: string | null;
  covers: number | null;
  part: string | null;
  keep: number;
  bytes: number;
}

const candidatesSql = `
SELECT id, document, pos, at, kc, covers, part, keep, bytes FROM entries
WHERE document IN (SELECT DISTINCT document FROM entries WHERE covers IS NOT NULL)
ORDER BY document, pos`;

/** Groups rows by their `document` (rows come ordered by document). */
export function byDocument<R extends { document: number }>(rows: readonly R[]): R[][] {
  const groups: R[][] = [];
  let current: R[] = [];
  for (const row of rows) {
    if (current.length > 0 && (current[0] as R).document !== row.document) {
      groups.push(current);
      current = [];
    }
    current.push(row);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/**
 * store.db's compaction: drops, in one transaction, every entry the history no longer needs (see
 * above) and updates the documents' byte counts. `now` in ms.
 */
export function planCompaction(
  db: BetterSqlite3.Database,
  now: number,
  history: HistoryRules,
): CompactionReport {
  return db.transaction(() => {
    const rows = db.prepare<[], CandidateRow>(candidatesSql).all();
    const deleteEntry = db.prepare('DELETE FROM entries WHERE id = ?');
    const lessBytes = db.prepare('UPDATE documents SET bytes = bytes - ? WHERE id = ?');
    const report: CompactionReport = { dropped: 0, bytes: 0 };
    for (const document of byDocument(rows)) {
      const dropped = new Set(droppableEntries(document.map(candidateOfRow), now, history));
      if (dropped.size === 0) continue;
      let documentBytes = 0;
      for (const row of document) {
        if (!dropped.has(row.id)) continue;
        deleteEntry.run(row.id);
        documentBytes += row.bytes;
      }
      lessBytes.run(documentBytes, (document[0] as CandidateRow).document);
      report.dropped += dropped.size;
      report.bytes += documentBytes;
    }
    return report;
  })();
}

function candidateOfRow(row: CandidateRow): CompactionCandidate {
  return {
    id: row.id,
    pos: row.pos,
    at: row.at,
    kc: row.kc ?? undefined,
    covers: row.covers ?? undefined,
    part: row.part === null ? undefined : (JSON.parse(row.part) as Piece),
    keep: row.keep === 1,
  };
}
