/**
 * "Did you mean" for the client commands. The server has its own for config keys
 * (server/config/suggest.ts); the client may not import the server, so this is the small twin.
 */

/** Edit distance with swaps of neighbours counted as one edit (`remvoe` → `remove` is 1). */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, before[j - 2]! + 1);
      }
      row.push(best);
    }
    before = previous;
    previous = row;
  }
  return previous[b.length]!;
}

/**
 * The known word closest to a mistyped one; undefined when nothing is close (at most 2 edits,
 * and at most half of the word's letters).
 */
export function closest(typed: string, known: Iterable<string>): string | undefined {
  const word = typed.toLowerCase();
  let best: { word: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(word, candidate);
    if (distance > 2 || distance * 2 > word.length) continue;
    if (best === undefined || distance < best.distance) best = { word: candidate, distance };
  }
  return best?.word;
}

/** `: did you mean X?` for the closest of `known`, or `` when nothing is close. */
export function didYouMean(typed: string, known: Iterable<string>, prefix = ''): string {
  const match = closest(typed, known);
  return match === undefined ? '' : `: did you mean ${prefix}${match}?`;
}
