import * as Y from 'yjs';
import { changeLines } from '../client/cli/history-lines.ts';
import { addEntry } from '../client/folder/document.ts';
import type { HistoryEntry } from '../client/yjs-history.ts';

/**
 * `history`'s lines from a folder document's entries, at 1,000 and 3,000 entries (each a new
 * file, every tenth an edit of an earlier one): the time per entry must stay flat as the folder
 * grows (`npm run bench:history`).
 */

function entriesOf(count: number): HistoryEntry[] {
  const doc = new Y.Doc();
  const files = doc.getMap<unknown>('files');
  const entries: HistoryEntry[] = [];
  doc.on('update', (update: Uint8Array) => {
    entries.push({
      pos: entries.length + 1,
      at: 1_767_225_600_000 + entries.length,
      from: '1',
      update,
    });
  });
  const ids: string[] = [];
  for (let n = 0; n < count; n += 1) {
    if (n % 10 === 9) {
      const value = files.get(ids[n % ids.length]!) as Y.Map<unknown>;
      (value.get('text') as Y.Text).insert(0, `edit ${n}\n`);
      continue;
    }
    ids.push(
      addEntry(files, { path: `notes/${n}.md`, content: `note ${n}\n`, device: '1', time: n }),
    );
  }
  return entries;
}

const rounds = 5;
const figures: { count: number; ms: number }[] = [];
for (const count of [1_000, 3_000]) {
  const entries = entriesOf(count);
  const times: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const started = performance.now();
    const lines = changeLines(entries, undefined);
    times.push(performance.now() - started);
    if (lines.length < count * 0.9)
      throw new Error(`only ${lines.length} lines for ${count} entries`);
  }
  times.sort((a, b) => a - b);
  figures.push({ count, ms: times[Math.floor(rounds / 2)]! });
}
for (const { count, ms } of figures) {
  console.log(
    `${count} entries: ${ms.toFixed(1)} ms (${((ms / count) * 1000).toFixed(1)} µs per entry)`,
  );
}
const [small, large] = figures;
console.log(
  `time per entry at 3,000 / at 1,000: ${(large!.ms / 3_000 / (small!.ms / 1_000)).toFixed(2)}x`,
);
