import {
  BACKSLASH,
  bytesAt,
  COLON,
  COMMA,
  OPEN_BRACE,
  QUOTE,
  scanString,
  skipSpace,
  skipValue,
} from './json-scanner.ts';

/** Where the payload's source stands in a frame: bytes `[start, end)`. */
export interface PayloadSpan {
  start: number;
  end: number;
}

const payloadKey = Buffer.from('"payload"');

/** Whether the key whose quotes are at `[at, end)` is `payload`, escaped or not. */
function isPayloadKey(b: Buffer, at: number, end: number): boolean {
  if (!b.subarray(at, end).includes(BACKSLASH)) {
    return end - at === payloadKey.length && bytesAt(b, at, payloadKey, end);
  }
  return JSON.parse(b.toString('utf8', at, end)) === 'payload';
}

/**
 * Where the top-level `payload` member of a JSON object stands in its bytes, so the relay
 * forwards it byte for byte (big integers, key order, spacing and escapes untouched) without
 * serializing it again. `b` must already have passed `JSON.parse` as an object. With duplicate
 * keys the last one wins, as in `JSON.parse`. Undefined when there is no `payload`.
 */
export function payloadSpan(b: Buffer): PayloadSpan | undefined {
  const end = b.length;
  let i = skipSpace(b, 0, end);
  if (b[i] !== OPEN_BRACE) return undefined;
  i = skipSpace(b, i + 1, end);
  let found: PayloadSpan | undefined;
  while (b[i] === QUOTE) {
    const keyEnd = scanString(b, i, end);
    if (keyEnd < 0) return undefined;
    const isPayload = isPayloadKey(b, i, keyEnd);
    i = skipSpace(b, keyEnd, end);
    if (b[i] !== COLON) return undefined;
    const valueStart = skipSpace(b, i + 1, end);
    const valueEnd = skipValue(b, valueStart, end);
    if (isPayload) found = { start: valueStart, end: valueEnd };
    i = skipSpace(b, valueEnd, end);
    if (b[i] !== COMMA) break;
    i = skipSpace(b, i + 1, end);
  }
  return found;
}
