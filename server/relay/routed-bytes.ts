import type { DeviceId } from './messages.ts';
import { BACKSLASH, CLOSE_BRACE, COMMA, OPEN_BRACE, QUOTE } from './payload-span.ts';

/**
 * The relay's hot path works on the bytes of a routed frame as `ws` delivered them (already
 * checked to be UTF-8): a frame written exactly `{"to":<to>,"payload":{…}}` is recognised and its
 * payload validated as JSON without decoding it to a string, parsing it into objects or encoding
 * it again. The outgoing frame is then spliced together from the sender's and the room's prefix
 * and two slices of the incoming bytes (`spliceRoutedFrame`). Any other spelling is left to
 * `parseFrame`, which accepts a superset of what is recognised here, with the same result.
 */

const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const SLASH = 0x2f;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const ONE = 0x31;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const LOWER_U = 0x75;

/** Containers nested deeper than this are left to `JSON.parse` (the slow path). */
const maxDepth = 64;
/** 1 for an object, 0 for an array, per open container (one stack for the whole relay). */
const containers = new Uint8Array(maxDepth);

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

function skipSpace(b: Uint8Array, at: number, end: number): number {
  let i = at;
  while (i < end && isSpace(b[i] as number)) i++;
  return i;
}

/** Index just past the string literal whose opening quote is at `at`, or -1 if it is not one. */
function scanString(b: Uint8Array, at: number, end: number): number {
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
      } else if (
        e !== QUOTE &&
        e !== BACKSLASH &&
        e !== SLASH &&
        e !== 0x62 && // b
        e !== 0x66 && // f
        e !== 0x6e && // n
        e !== 0x72 && // r
        e !== 0x74 // t
      ) {
        return -1;
      }
    } else if (c < 0x20) {
      return -1;
    }
    // bytes >= 0x80 belong to characters ws already checked to be valid UTF-8
  }
  return -1;
}

/** Index just past the number that starts at `at` (RFC 8259 grammar), or -1. */
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

/**
 * Whether the bytes `[start, end)` are exactly one JSON object, white space around it allowed
 * (RFC 8259). Strict on every rule `JSON.parse` applies; false (leave it to `JSON.parse`) also
 * for objects nested deeper than 64 containers. The bytes must be valid UTF-8.
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

/** A routed frame recognised on its bytes: its target and where the `to` value ends. */
export interface SplicedRoute {
  to: DeviceId;
  toEnd: number;
}

/** `{"to":`: the bytes every recognised frame starts with; `to`'s value follows. */
const toStart = 6;
const toPrefix = Buffer.from('{"to":');
const payloadKey = Buffer.from(',"payload":');
const broadcastBytes = Buffer.from('"broadcast"');
const hostBytes = Buffer.from('"host"');

/** Whether `word` stands at `at`, ending at or before `end`. */
function bytesAt(b: Uint8Array, at: number, word: Uint8Array, end = b.length): boolean {
  if (at + word.length > end) return false;
  for (let k = 0; k < word.length; k++) if (b[at + k] !== word[k]) return false;
  return true;
}

/**
 * Recognises `{"to":<to>,"payload":{…}}` written exactly so (no spaces around the two members, no
 * other member; `to` a plain ASCII string of 1–255 characters without escapes, or a positive
 * integer of at most 15 digits) with a payload that is one valid JSON object. Undefined for any
 * other frame, which then goes through `parseFrame` in full.
 */
export function recogniseRouted(data: Buffer): SplicedRoute | undefined {
  const length = data.length;
  if (!bytesAt(data, 0, toPrefix)) return undefined;
  let to: DeviceId;
  let i = toStart;
  const first = data[i] as number;
  if (first === QUOTE) {
    if (bytesAt(data, i, broadcastBytes)) {
      to = 'broadcast';
      i += broadcastBytes.length;
    } else if (bytesAt(data, i, hostBytes)) {
      to = 'host';
      i += hostBytes.length;
    } else {
      const start = i + 1;
      i = start;
      for (;;) {
        const c = data[i];
        if (c === QUOTE) break;
        // no escapes, no control characters, ASCII only (so characters are bytes)
        if (c === undefined || c < 0x20 || c >= 0x80 || c === BACKSLASH || i - start >= 255)
          return undefined;
        i++;
      }
      if (i === start) return undefined;
      to = data.toString('latin1', start, i);
      i++;
    }
  } else if (first >= ONE && first <= NINE) {
    let value = first - ZERO;
    i++;
    for (;;) {
      const c = data[i];
      if (c === COMMA) break;
      if (c === undefined || !isDigit(c) || i - toStart >= 15) return undefined;
      value = value * 10 + (c - ZERO);
      i++;
    }
    to = value;
  } else {
    return undefined;
  }
  const toEnd = i;
  if (!bytesAt(data, i, payloadKey)) return undefined;
  const start = i + payloadKey.length;
  if (data[length - 1] !== CLOSE_BRACE || !isJsonObject(data, start, length - 1)) {
    return undefined;
  }
  return { to, toEnd };
}

/**
 * The outgoing frame `{"from":…,"to":…,"room":…,"payload":…}` of a recognised frame: `head` is
 * `{"from":<device>,"to":`, `roomMember` is `,"room":<room id>`, and `to` and the payload are
 * copied from `data` as they were written.
 */
export function spliceRoutedFrame(
  data: Buffer,
  toEnd: number,
  head: Buffer,
  roomMember: Buffer,
): Buffer {
  const toLength = toEnd - toStart;
  const out = Buffer.allocUnsafe(head.length + toLength + roomMember.length + data.length - toEnd);
  out.set(head, 0);
  let at = head.length;
  out.set(data.subarray(toStart, toEnd), at);
  at += toLength;
  out.set(roomMember, at);
  out.set(data.subarray(toEnd), at + roomMember.length);
  return out;
}
