/** Edit distance (insertions, deletions, substitutions, swaps of neighbours) between two words. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((above[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (above[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, ((rows[i - 2] as number[])[j - 2] ?? 0) + 1);
      row.push(best);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] ?? 0;
}

/** Separators and case do not count: `db_pass`, `DB.PASS` and `dbpass` are the same word. */
const normalise = (key: string) => key.toLowerCase().replace(/[._-]/g, '');

/**
 * The known key closest to a mistyped one, for a "did you mean" hint; undefined when nothing
 * is close (at most 2 edits, and fewer than a third of the word).
 */
export function closestKey(key: string, known: Iterable<string>): string | undefined {
  const typed = normalise(key);
  const dotted = key.includes('.');
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    // Between equally close spellings, the one written in the same style (DB_PASS / db.pass).
    const distance =
      editDistance(typed, normalise(candidate)) + (candidate.includes('.') === dotted ? 0 : 0.5);
    if (distance > 2.5 || Math.floor(distance) * 3 > typed.length) continue;
    if (best === undefined || distance < best.distance) best = { key: candidate, distance };
  }
  return best?.key;
}
