import * as Y from 'yjs';

/**
 * The same change made on two devices at once, kept once, as git keeps it.
 *
 * Two devices that insert the same text at the same place, neither having seen the other's,
 * make two items of the document that the merge keeps side by side: "t2t2" where each wrote
 * "t2". Such twins are told apart from a text written twice on purpose by where they were
 * made: both were inserted between the same two characters (the same left and right origin), so
 * neither device knew of the other's insert. Every device that sees them removes the later one
 * in the document's order, which is the same item everywhere: the removals of several devices
 * are one removal.
 *
 * Only whole inserts count: a twin that was edited since (split into several items, a part
 * removed) is left as it is. Returns how many were removed; call it inside a transaction.
 */
export function dropTwins(text: Y.Text): number {
  const twins: { index: number; length: number }[] = [];
  let index = 0;
  let kept: Y.Item | undefined;
  for (let item = text._start; item !== null; item = item.right) {
    if (item.deleted || !item.countable) continue;
    if (kept !== undefined && twinOf(kept, item)) twins.push({ index, length: item.length });
    else kept = item;
    index += item.length;
  }
  for (const twin of twins.reverse()) text.delete(twin.index, twin.length);
  return twins.length;
}

function twinOf(first: Y.Item, next: Y.Item): boolean {
  return (
    next.id.client !== first.id.client &&
    next.content instanceof Y.ContentString &&
    first.content instanceof Y.ContentString &&
    next.content.str === first.content.str &&
    sameId(next.origin, first.origin) &&
    sameId(next.rightOrigin, first.rightOrigin)
  );
}

function sameId(a: Y.ID | null, b: Y.ID | null): boolean {
  return a === null || b === null ? a === b : Y.compareIDs(a, b);
}
