import type * as Y from 'yjs';

/** How far a change is widened to whole words, at most, on each side. */
const maxWidenChars = 64;

function isSpace(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r';
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * The one replacement that turns `from` into `to`: the common prefix and suffix are kept, and
 * the replaced part is widened to whole words (up to 64 characters each side). Two devices that
 * rewrite the same word at once then keep both words side by side (`draft final`), instead of a
 * mix of their letters (`t1` edited to `t9` and to `t12` would give `t92`). A surrogate pair is
 * never split.
 */
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
  // Back to the start of the word (the prefix is common: `to` moves the same way).
  for (let n = 0; n < maxWidenChars && start > 0 && !isSpace(from[start - 1]); n += 1) start -= 1;
  // On to the end of the word.
  for (let n = 0; n < maxWidenChars && end > 0 && !isSpace(from[from.length - end]); n += 1) {
    end -= 1;
  }
  if (start > 0 && isLowSurrogate(from.charCodeAt(start))) start -= 1;
  if (end > 0 && isLowSurrogate(from.charCodeAt(from.length - end))) end -= 1;
  return {
    start,
    deleteCount: from.length - start - end,
    insert: to.slice(start, to.length - end),
  };
}

/** Edits `text` into `content` with the one replacement `diff` finds. */
export function replaceText(text: Y.Text, content: string): void {
  const current = text.toString();
  if (current.length !== text.length) {
    // Embeds (which no device of ours makes) count in the indices and not in the string: the
    // positions of a diff would be off, so the whole text is replaced.
    text.delete(0, text.length);
    text.insert(0, content);
    return;
  }
  const edit = diff(current, content);
  if (edit.deleteCount > 0) text.delete(edit.start, edit.deleteCount);
  if (edit.insert !== '') text.insert(edit.start, edit.insert);
}
