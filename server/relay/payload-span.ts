/** Character codes the frame scanners compare against. */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
export const COMMA = 0x2c;
const COLON = 0x3a;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(text: string, at: number): number {
  let i = at;
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Index just past the string literal that starts at `at` (which holds the opening quote). */
function skipString(text: string, at: number): number {
  let from = at + 1;
  for (;;) {
    // jump to the next quote natively; it closes the string unless an odd run of backslashes
    // escapes it (the run cannot extend past the opening quote)
    const quote = text.indexOf('"', from);
    if (quote < 0) return text.length;
    let b = quote - 1;
    while (text.charCodeAt(b) === BACKSLASH) b--;
    if ((quote - 1 - b) % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** Index just past the JSON value that starts at `at`. */
function skipValue(text: string, at: number): number {
  const first = text.charCodeAt(at);
  if (first === QUOTE) return skipString(text, at);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    // number, true, false, null: runs until a delimiter
    let i = at + 1;
    for (;;) {
      const c = text.charCodeAt(i);
      if (
        c === COMMA ||
        c === CLOSE_BRACE ||
        c === CLOSE_BRACKET ||
        isSpace(c) ||
        Number.isNaN(c)
      ) {
        return i;
      }
      i++;
    }
  }
  let depth = 0;
  let i = at;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = skipString(text, i);
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return i + 1;
    }
    i++;
  }
}

/**
 * The exact source text of the top-level `payload` member of a JSON object, so the relay
 * forwards it byte for byte (big integers, key order, spacing and escapes untouched) without
 * serializing it again. `text` must already have passed `JSON.parse` as an object. With
 * duplicate keys the last one wins, as in `JSON.parse`. Undefined when there is no `payload`.
 */
export function payloadSource(text: string): string | undefined {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return undefined;
  i = skipSpace(text, i + 1);
  let found: string | undefined;
  while (text.charCodeAt(i) === QUOTE) {
    const keyEnd = skipString(text, i);
    const rawKey = text.slice(i + 1, keyEnd - 1);
    const key = rawKey.includes('\\') ? (JSON.parse(`"${rawKey}"`) as string) : rawKey;
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== COLON) return undefined;
    const valueStart = skipSpace(text, i + 1);
    const valueEnd = skipValue(text, valueStart);
    if (key === 'payload') found = text.slice(valueStart, valueEnd);
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) !== COMMA) break;
    i = skipSpace(text, i + 1);
  }
  return found;
}
