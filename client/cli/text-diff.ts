import type * as Y from 'yjs';

/** The one replacement that turns `from` into `to` (common prefix and suffix kept). */
export function diff(
  from: string,
  to: string,
): { start: number; deleteCount: number; insert: string } {
  let start = 0;
  while (start < from.length && start < to.length && from[start] === to[start]) start += 1;
  let end = 0;
  while (
    end < from.length - start &&
    end < to.length - start &&
    from[from.length - 1 - end] === to[to.length - 1 - end]
  ) {
    end += 1;
  }
  // Never split a surrogate pair: the change starts before a low half and ends after a high one.
  if (start > 0 && isLowSurrogate(from.charCodeAt(start))) start -= 1;
  if (end > 0 && isLowSurrogate(from.charCodeAt(from.length - end))) end -= 1;
  return {
    start,
    deleteCount: from.length - start - end,
    insert: to.slice(start, to.length - end),
  };
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Edits `text` into `content` with the one replacement `diff` finds. */
export function replaceText(text: Y.Text, content: string): void {
  const edit = diff(text.toString(), content);
  if (edit.deleteCount > 0) text.delete(edit.start, edit.deleteCount);
  if (edit.insert !== '') text.insert(edit.start, edit.insert);
}
