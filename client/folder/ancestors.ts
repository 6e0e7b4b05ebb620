import { diffArrays } from 'diff';
import * as Y from 'yjs';
import { entryOf, folderDocName } from './document.ts';
import { linesOf } from './text-merge.ts';

/**
 * The common ancestor of a text file found in a folder on its first `sync` and the text another
 * device has at that path: a file copied from an earlier version (a backup, another machine)
 * and edited since merges with what the other devices made of that version, as git merges a
 * branch from its merge base, instead of becoming a conflict copy.
 *
 * The candidates are the versions the text had in the host's history of the folder document
 * (each update the host still keeps, one after the other). The ancestor is the version closest
 * to the file here, by lines changed (the earlier of two as close): the file is that version
 * with the edits made here, which are fewer than its differences from any other version, unless
 * an edit here happens to repeat one made on another device later (`closestVersion` says how
 * that is caught). A file equal to a version is an old copy with no edit of its own: the merge
 * gives the text as it is now (the old one stays in the history).
 */

/** Every text the entries `ids` had through `updates` (oldest first, each once), by id. */
export function textVersions(updates: Uint8Array[], ids: Iterable<string>): Map<string, string[]> {
  const wanted = new Set(ids);
  const versions = new Map<string, string[]>();
  const doc = new Y.Doc();
  const files = doc.getMap<unknown>(folderDocName);
  const changed = new Set<string>();
  files.observeDeep((events) => {
    for (const event of events) {
      if (event.target === files) for (const id of event.changes.keys.keys()) changed.add(id);
      else if (typeof event.path[0] === 'string') changed.add(event.path[0]);
    }
  });
  for (const update of updates) {
    Y.applyUpdate(doc, update);
    for (const id of changed) {
      if (!wanted.has(id)) continue;
      const entry = entryOf(id, files.get(id));
      if (typeof entry !== 'object' || entry.text === undefined) continue;
      const text = entry.text.toString();
      const seen = versions.get(id);
      if (seen === undefined) versions.set(id, [text]);
      else if (!seen.includes(text)) seen.push(text);
    }
    changed.clear();
  }
  doc.destroy();
  return versions;
}

/**
 * The common ancestor of `here` among `versions` (oldest first), or undefined. Only a version
 * `here` keeps at least half the lines of counts: two files that share a name and little else
 * (two notes made apart) stay two texts, one of them a conflict copy. Of those, the closest by
 * lines changed (the earlier of two as close) that `here` takes back nothing from: a line of an
 * older version that this one no longer has, found in `here`, says that `here` was made before
 * this version, and merging from it would undo the change that removed the line. When every
 * version takes something back, the oldest: a base older than the true one never undoes a
 * change (what both sides changed the same way is kept once; what they changed two ways is kept
 * side by side).
 */
export function closestVersion(versions: string[], here: string): string | undefined {
  const lines = linesOf(here);
  const related: { index: number; changed: number }[] = [];
  for (const [index, version] of versions.entries()) {
    let kept = 0;
    let changed = 0;
    for (const part of diffArrays(linesOf(version), lines)) {
      const count = part.count ?? part.value.length;
      if (part.added || part.removed) changed += count;
      else kept += count;
    }
    if (kept > 0 && 2 * kept >= linesOf(version).length) related.push({ index, changed });
  }
  if (related.length === 0) return undefined;
  const byCloseness = [...related].sort((x, y) => x.changed - y.changed || x.index - y.index);
  const takesBack = (index: number) => {
    const has = new Set(linesOf(versions[index]!).map(trimmed));
    const older = new Set(versions.slice(0, index).flatMap((v) => linesOf(v).map(trimmed)));
    return lines.some((line) => {
      const text = trimmed(line);
      return text !== '' && !has.has(text) && older.has(text);
    });
  };
  const found = byCloseness.find(({ index }) => !takesBack(index)) ?? related[0]!;
  return versions[found.index];
}

function trimmed(line: string): string {
  return line.trim();
}
