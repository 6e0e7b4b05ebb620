import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { changeLines } from '../../../client/cli/history-lines.ts';
import {
  addEntry,
  entryDigest,
  entryLive,
  entryOf,
  type FileEntry,
} from '../../../client/folder/document.ts';
import type { HistoryEntry } from '../../../client/yjs-history.ts';

/**
 * `history`'s lines, read entry by entry from what each update touched, against the same lines
 * found the plain way: every file's state computed again from the whole document after each
 * entry. Random folders: files created, edited, deleted, restored and renamed, several in one
 * entry.
 */

type Step =
  | { kind: 'create'; name: number }
  | { kind: 'edit' | 'delete' | 'restore'; file: number }
  | { kind: 'rename'; file: number; to: number };

const name = fc.integer({ min: 0, max: 5 });
const file = fc.nat(30);
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('create' as const), name }),
  fc.record({
    kind: fc.constantFrom('edit' as const, 'delete' as const, 'restore' as const),
    file,
  }),
  fc.record({ kind: fc.constant('rename' as const), file, to: name }),
);

/** The entries a run of steps makes: each group of steps one update. */
function entriesOf(groups: Step[][]): HistoryEntry[] {
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
  let made = 0;
  for (const group of groups) {
    doc.transact(() => {
      for (const each of group) {
        if (each.kind === 'create') {
          made += 1;
          ids.push(
            addEntry(files, {
              path: `f${each.name}.md`,
              content: `v${made}\n`,
              device: '1',
              time: made,
            }),
          );
          continue;
        }
        if (ids.length === 0) continue;
        const map = files.get(ids[each.file % ids.length]!) as Y.Map<unknown>;
        const entry = entryOf('x', map) as FileEntry;
        if (each.kind === 'edit') (map.get('text') as Y.Text).insert(0, 'more ');
        else if (each.kind === 'delete') map.set('deleted', entryDigest(entry));
        else if (each.kind === 'restore') map.delete('deleted');
        else if (each.kind === 'rename') map.set('path', `f${each.to}.md`);
      }
    });
  }
  return entries;
}

/** The same lines found the plain way: every path's state again after each entry. */
function plainLines(entries: HistoryEntry[], path: string | undefined): string[] {
  const statesOf = (doc: Y.Doc) => {
    const byPath = new Map<string, FileEntry[]>();
    const paths = new Map<string, string>();
    for (const [id, value] of doc.getMap<unknown>('files')) {
      const entry = entryOf(id, value);
      if (typeof entry === 'string') continue;
      byPath.set(entry.path, [...(byPath.get(entry.path) ?? []), entry]);
      if (entryLive(entry)) paths.set(id, entry.path);
    }
    const states = new Map<string, string>();
    for (const [name, list] of byPath) {
      const live = list.filter(entryLive);
      states.set(name, live.length === 0 ? 'deleted' : live.map(entryDigest).sort().join(','));
    }
    return { states, paths };
  };
  const lines: string[] = [];
  const doc = new Y.Doc();
  let before = statesOf(doc);
  for (const entry of entries) {
    Y.applyUpdate(doc, entry.update);
    const after = statesOf(doc);
    const line = (change: string, name: string) =>
      lines.push(`${new Date(entry.at).toISOString()}  device ${entry.from}  ${change}  ${name}`);
    const renames: [string, string][] = [];
    for (const [id, now] of after.paths) {
      const was = before.paths.get(id);
      if (was !== undefined && was !== now) renames.push([was, now]);
    }
    const renamedTo = new Set(renames.map(([, to]) => to));
    const renamedAway = new Set(renames.map(([from]) => from));
    for (const [from, to] of renames)
      if (path === undefined || path === from || path === to) line('renamed', `${from} → ${to}`);
    for (const [name, state] of after.states) {
      if (path !== undefined && name !== path) continue;
      const was = before.states.get(name);
      if (was === state) continue;
      if (renamedTo.has(name) && (was === undefined || was === 'deleted')) continue;
      if (renamedAway.has(name) && state === 'deleted') continue;
      const change =
        state === 'deleted'
          ? 'deleted'
          : was === undefined
            ? 'created'
            : was === 'deleted'
              ? 'restored'
              : 'changed';
      line(change, name);
    }
    before = after;
  }
  return lines;
}

describe('history lines', () => {
  it('are the lines of the whole document read again after each entry, in any order of changes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(step, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 25 }),
        fc.option(
          name.map((n) => `f${n}.md`),
          { nil: undefined },
        ),
        (groups, path) => {
          const entries = entriesOf(groups);
          // The same lines; within one entry, in any order.
          const sorted = (lines: string[]) => [...lines].sort();
          expect(sorted(changeLines(entries, path))).toEqual(sorted(plainLines(entries, path)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
