import type BetterSqlite3 from 'better-sqlite3';
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
 * whatever covers it. A snapshot covering positions at or beyond its own is ignored (it cannot stand for what comes
 * after it), and one sent in pieces counts only once every piece is stored. A snapshot never
 * drops an entry of another `kc`, so a device with another key (another passphrase, or none)
 * cannot make the host drop what the others wrote; the newest entry of a document is never
 * covered, so its last position stays.
 */

/** A snapshot that may stand for what it covers: whole, and covering only earlier positions. */
const usableSnapshot = `s.covers IS NOT NULL AND s.covers < s.pos AND (s.part IS NULL OR (
  SELECT count(*) FROM entries p WHERE p.document = s.document AND p.covers = s.covers
    AND p.kc IS s.kc AND json_extract(p.part, '$.m') = json_extract(s.part, '$.m')
) = json_extract(s.part, '$.n'))`;

const droppable = `
SELECT e.id, e.document, e.bytes FROM entries e
WHERE e.document IN (SELECT DISTINCT document FROM entries WHERE covers IS NOT NULL)
AND NOT (e.keep = 1 AND e.at >= ?)
AND EXISTS (
  SELECT 1 FROM entries s
  WHERE s.document = e.document AND s.kc IS e.kc AND s.pos > e.pos AND e.pos <= s.covers
    AND ${usableSnapshot}
    AND (s.at < ? OR (e.at / CAST(? AS INTEGER) = s.at / CAST(? AS INTEGER)
      AND s.at / CAST(? AS INTEGER) < ?))
)`;

/**
 * Drops, in one transaction, every entry the history no longer needs (see above); updates the
 * documents' byte counts. `now` in ms; `keepMs` the history window, `stepMs` its step.
 */
export function planCompaction(
  db: BetterSqlite3.Database,
  now: number,
  history: { keepMs: number; stepMs: number },
): CompactionReport {
  const stepMs = Math.max(1, Math.floor(history.stepMs));
  // In the order of the query's placeholders (the sql.js engine binds no named ones). The step
  // length is cast in the query: better-sqlite3 binds every number as REAL, and a step number is
  // an integer division (a REAL one would put two moments of one step in different steps).
  const windowStart = now - history.keepMs;
  const params = [windowStart, windowStart, stepMs, stepMs, stepMs, Math.floor(now / stepMs)];
  return db.transaction(() => {
    const rows = db
      .prepare<number[], { id: number; document: number; bytes: number }>(droppable)
      .all(...params);
    if (rows.length === 0) return { dropped: 0, bytes: 0 };
    const deleteEntry = db.prepare('DELETE FROM entries WHERE id = ?');
    const freed = new Map<number, number>();
    let bytes = 0;
    for (const row of rows) {
      deleteEntry.run(row.id);
      freed.set(row.document, (freed.get(row.document) ?? 0) + row.bytes);
      bytes += row.bytes;
    }
    const lessBytes = db.prepare('UPDATE documents SET bytes = bytes - ? WHERE id = ?');
    for (const [document, documentBytes] of freed) lessBytes.run(documentBytes, document);
    return { dropped: rows.length, bytes };
  })();
}
