/**
 * JSON read on its bytes (RFC 8259), for the relay's two users of it: the hot path, which
 * validates a routed frame's payload without parsing it (`routed-bytes.ts`), and the slow path,
 * which cuts the payload's source out of a frame `JSON.parse` already accepted
 * (`payload-span.ts`). The bytes must be valid UTF-8 (`ws` checks every text frame).
 */

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const ZERO = 0x30;
export const ONE = 0x31;
export const NINE = 0x39;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const SLASH = 0x2f;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const LOWER_U = 0x75;
/** The characters after a backslash that stand for one character: `b f n r t`. */
const SHORT_ESCAPES = [0x62, 0x66, 0x6e, 0x72, 0x74];
/** Below this, a character must be escaped inside a string. */
const FIRST_PLAIN = 0x20;

/** Containers nested deeper than this are left to `JSON.parse` (the slow path). */
const maxDepth = 64;
/** 1 for an object, 0 for an array, per open container (one stack for the whole relay). */
const containers = new Uint8Array(maxDepth);

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

export function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

/** Index of the first byte at or after `at` that is not white space (at most `end`). */
export function skipSpace(b: Uint8Array, at: number, end: number): number {
  let i = at;
  while (i < end && isSpace(b[i] as number)) i++;
  return i;
}

/** Whether `word` stands at `at`, ending at or before `end`. */
export function bytesAt(b: Uint8Array, at: number, word: Uint8Array, end = b.length): boolean {
  if (at + word.length > end) return false;
  for (let k = 0; k < word.length; k++) if (b[at + k] !== word[k]) return false;
  return true;
}

/** Index just past the string literal whose opening quote is at `at`, or -1 if it is not one. */
export function scanString(b: Uint8Array, at: number, end: number): number {
  let i = at + 1;
  while (i < end) {
    const c = b[i++] as number;
    if (c === QUOTE) return i;
    if (c === BACKSLASH) {
      if (i >= end) return -1;
      const e = b[i++] as number;
      if (e === LOWER_U) {
        if (i + 4 > end) return -1;
        for (let k = i; k < i + 4; k++) if (!isHex(b[k] as number)) return -1;
        i += 4;
      } else if (e !== QUOTE && e !== BACKSLASH && e !== SLASH && !SHORT_ESCAPES.includes(e)) {
        return -1;
      }
    } else if (c < FIRST_PLAIN) {
      return -1;
    }
    // bytes >= 0x80 belong to characters ws already checked to be valid UTF-8
  }
  return -1;
}

/** Index just past the number that starts at `at`, or -1. */
function scanNumber(b: Uint8Array, at: number, end: number): number {
  let i = at;
  if (b[i] === MINUS) i++;
  if (i >= end) return -1;
  const first = b[i] as number;
  if (first === ZERO) i++;
  else if (first >= ONE && first <= NINE) {
    i++;
    while (i < end && isDigit(b[i] as number)) i++;
  } else return -1;
  if (i < end && b[i] === DOT) {
    const digits = ++i;
    while (i < end && isDigit(b[i] as number)) i++;
    if (i === digits) return -1;
  }
  if (i < end && (b[i] === LOWER_E || b[i] === UPPER_E)) {
    i++;
    if (i < end && (b[i] === PLUS || b[i] === MINUS)) i++;
    const digits = i;
    while (i < end && isDigit(b[i] as number)) i++;
    if (i === digits) return -1;
  }
  return i;
}

const literals = [Buffer.from('true'), Buffer.from('false'), Buffer.from('null')];

/** Index just past `true`, `false` or `null` at `at`, or -1. */
function scanLiteral(b: Uint8Array, at: number, end: number): number {
  for (const word of literals) {
    if (word[0] === b[at]) return bytesAt(b, at, word, end) ? at + word.length : -1;
  }
  return -1;
}

/** From a member's key at `at` to the first byte of its value, or -1. */
function memberValue(b: Uint8Array, at: number, end: number): number {
  if (b[at] !== QUOTE) return -1;
  let i = scanString(b, at, end);
  if (i < 0) return -1;
  i = skipSpace(b, i, end);
  if (b[i] !== COLON) return -1;
  i = skipSpace(b, i + 1, end);
  return i < end ? i : -1;
}

/**
 * Whether the bytes `[start, end)` are exactly one JSON object, white space around it allowed.
 * Strict on every rule `JSON.parse` applies; false (leave it to `JSON.parse`) also for objects
 * nested deeper than 64 containers.
 */
export function isJsonObject(b: Uint8Array, start: number, end: number): boolean {
  let i = skipSpace(b, start, end);
  if (b[i] !== OPEN_BRACE || i >= end) return false;
  let depth = 0;
  // At the top of the loop `i` is at the first byte of a value.
  for (;;) {
    if (i >= end) return false;
    const c = b[i] as number;
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (depth === maxDepth) return false;
      const isObject = c === OPEN_BRACE;
      containers[depth++] = isObject ? 1 : 0;
      i = skipSpace(b, i + 1, end);
      if (b[i] === (isObject ? CLOSE_BRACE : CLOSE_BRACKET)) {
        depth--;
        i++;
      } else {
        if (isObject) {
          i = memberValue(b, i, end);
          if (i < 0) return false;
        }
        continue;
      }
    } else {
      if (c === QUOTE) i = scanString(b, i, end);
      else if (c === MINUS || isDigit(c)) i = scanNumber(b, i, end);
      else i = scanLiteral(b, i, end);
      if (i < 0) return false;
    }
    // after a value: a comma and the next one, or the end of one or more containers
    for (;;) {
      if (depth === 0) return skipSpace(b, i, end) === end;
      i = skipSpace(b, i, end);
      if (i >= end) return false;
      const isObject = containers[depth - 1] === 1;
      const d = b[i];
      if (d === COMMA) {
        i = skipSpace(b, i + 1, end);
        if (isObject) {
          i = memberValue(b, i, end);
          if (i < 0) return false;
        }
        break;
      }
      if (d !== (isObject ? CLOSE_BRACE : CLOSE_BRACKET)) return false;
      depth--;
      i++;
    }
  }
}

/**
 * Index just past the value that starts at `at`, in bytes `JSON.parse` already accepted (it
 * checks nothing, and has no depth limit).
 */
export function skipValue(b: Uint8Array, at: number, end: number): number {
  const first = b[at];
  if (first === QUOTE) return scanString(b, at, end);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    // number, true, false, null: runs until a delimiter
    let i = at + 1;
    while (i < end) {
      const c = b[i] as number;
      if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isSpace(c)) break;
      i++;
    }
    return i;
  }
  let depth = 0;
  let i = at;
  while (i < end) {
    const c = b[i] as number;
    if (c === QUOTE) {
      i = scanString(b, i, end);
      if (i < 0) return end;
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return i + 1;
    }
    i++;
  }
  return end;
}
