import { type DeviceId, maxDeviceIdLength, type RouteTarget } from '../../protocol/relay-frames.ts';
import {
  BACKSLASH,
  bytesAt,
  CLOSE_BRACE,
  COMMA,
  isDigit,
  isJsonObject,
  NINE,
  ONE,
  QUOTE,
  ZERO,
} from './json-scanner.ts';
import { payloadSpan } from './payload-span.ts';

/**
 * The relay's hot path works on the bytes of a routed frame as `ws` delivered them (already
 * checked to be UTF-8): a frame written exactly `{"to":<to>,"payload":{…}}` is recognised and its
 * payload validated as JSON without decoding it to a string, parsing it into objects or encoding
 * it again. The outgoing frame is then spliced together from the sender's and the room's prefix
 * and two slices of the incoming bytes (`spliceRoutedFrame`). Any other spelling is left to
 * `parseFrame`, which accepts a superset of what is recognised here, with the same result.
 */

/** A routed frame recognised on its bytes: its target and where the `to` value ends. */
export interface SplicedRoute {
  to: DeviceId;
  toEnd: number;
}

/** `{"to":`: the bytes every recognised frame starts with; `to`'s value follows. */
const toPrefix = Buffer.from('{"to":');
const toStart = toPrefix.length;
const payloadKey = Buffer.from(',"payload":');
/** The most digits of a numeric `to` recognised here: all of them fit in a safe integer. */
const maxDeviceDigits = 15;
/** Characters at or above this are not ASCII; below `FIRST_PRINTABLE`, control characters. */
const FIRST_NON_ASCII = 0x80;
const FIRST_PRINTABLE = 0x20;
const broadcastBytes = Buffer.from('"broadcast"');
const hostBytes = Buffer.from('"host"');

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
        if (
          c === undefined ||
          c < FIRST_PRINTABLE ||
          c >= FIRST_NON_ASCII ||
          c === BACKSLASH ||
          i - start >= maxDeviceIdLength
        )
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
      if (c === undefined || !isDigit(c) || i - toStart >= maxDeviceDigits) return undefined;
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
 * The outgoing frame `{"from":…,"to":…,"room":…,"payload":…}` in one allocation: `head` is
 * `{"from":<device>,"to":`, then `to` as it stands in `toBytes[toStart, toEnd)`, `roomMember`
 * (`,"room":<room id>`) and the payload as it stands in `payloadBytes[payloadStart, payloadEnd)`.
 * Both routing paths build their frames here.
 */
export function composeRoutedFrame(
  head: Buffer,
  toBytes: Buffer,
  toStart: number,
  toEnd: number,
  roomMember: Buffer,
  payloadBytes: Buffer,
  payloadStart: number,
  payloadEnd: number,
): Buffer {
  const toLength = toEnd - toStart;
  const payloadLength = payloadEnd - payloadStart;
  const out = Buffer.allocUnsafe(
    head.length + toLength + roomMember.length + payloadKey.length + payloadLength + 1,
  );
  out.set(head, 0);
  let at = head.length;
  out.set(toBytes.subarray(toStart, toEnd), at);
  at += toLength;
  out.set(roomMember, at);
  at += roomMember.length;
  out.set(payloadKey, at);
  at += payloadKey.length;
  out.set(payloadBytes.subarray(payloadStart, payloadEnd), at);
  at += payloadLength;
  out[at] = CLOSE_BRACE;
  return out;
}

/**
 * The outgoing frame of a `{to, payload}` parsed in any other spelling: `data` is the frame as
 * received; the payload's source is cut out of it (`payloadSpan`), so it is forwarded unchanged.
 */
export function composeParsedFrame(
  head: Buffer,
  to: RouteTarget,
  payload: Record<string, unknown>,
  data: Buffer,
  roomMember: Buffer,
): Buffer {
  const toBytes = Buffer.from(JSON.stringify(to));
  const span = payloadSpan(data);
  const source = span === undefined ? Buffer.from(JSON.stringify(payload)) : data;
  return composeRoutedFrame(
    head,
    toBytes,
    0,
    toBytes.length,
    roomMember,
    source,
    span?.start ?? 0,
    span?.end ?? source.length,
  );
}

/**
 * The outgoing frame of a recognised frame (`recogniseRouted`): `to` and the payload are copied
 * from `data` as they were written.
 */
export function spliceRoutedFrame(
  data: Buffer,
  toEnd: number,
  head: Buffer,
  roomMember: Buffer,
): Buffer {
  const payloadStart = toEnd + payloadKey.length;
  return composeRoutedFrame(
    head,
    data,
    toStart,
    toEnd,
    roomMember,
    data,
    payloadStart,
    data.length - 1,
  );
}
