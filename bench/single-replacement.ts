import type * as Y from 'yjs';

/**
 * The reference of `npm run bench:merge`: how the folder sync sent a changed text before it was
 * sent region by region: one replacement from the first change to the last (widened to whole
 * words), which deleted and inserted again everything another device changed in between.
 */

const maxWidenChars = 64;

function isSpace(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\n' || ch === '\t' || ch === '\r';
}

export function replaceText(text: Y.Text, content: string): void {
  const from = text.toString();
  let start = 0;
  while (start < from.length && start < content.length && from[start] === content[start]) {
    start += 1;
  }
  let end = 0;
  while (
    end < from.length - start &&
    end < content.length - start &&
    from[from.length - 1 - end] === content[content.length - 1 - end]
  ) {
    end += 1;
  }
  for (let n = 0; n < maxWidenChars && start > 0 && !isSpace(from[start - 1]); n += 1) start -= 1;
  for (let n = 0; n < maxWidenChars && end > 0 && !isSpace(from[from.length - end]); n += 1) {
    end -= 1;
  }
  const deleteCount = from.length - start - end;
  const insert = content.slice(start, content.length - end);
  if (deleteCount > 0) text.delete(start, deleteCount);
  if (insert !== '') text.insert(start, insert);
}
