import type { z } from 'zod';
import { isStandardBase64, nodeBuffer } from '../protocol/base64.ts';
import { relayFrameSchemas, wireDeviceId } from '../protocol/relay-frames.ts';
import { type SortedFrame, sortControlFrame } from './store-frames.ts';

export type {
  ChunkAnswer,
  ErrorFrame,
  StoredEntry,
  StoredFrame,
  StoreFrame,
} from './store-frames.ts';

/** Frames the relay sends (the relay protocol), validated when they arrive; device ids as strings. */
const frames = relayFrameSchemas(wireDeviceId.transform(String));
const { joined: joinedSchema, presence: presenceSchema, host: hostSchema } = frames;
const { routed: routedSchema } = frames;

/** `joined`: this device is in the room; `buffered` missed messages follow at once. */
export type JoinedFrame = z.infer<typeof joinedSchema>;
/** Another device joined or left the room. */
export type PresenceFrame = z.infer<typeof presenceSchema>;
/** The host changed (the previous host left). */
export type HostFrame = z.infer<typeof hostSchema>;

/**
 * A message routed to this device: `from` is the sender's device id, `to` what the sender
 * addressed (`host`, `broadcast` or this device's id). Device ids are strings here.
 */
export type RoutedMessage = z.infer<typeof routedSchema>;

/** A frame from the relay: the room's, a routed message, or an answer of the host's store. */
export type RelayFrame = SortedFrame | ({ type: 'message' } & RoutedMessage);

/** Parses one text frame; undefined when it is not JSON or not a frame of the protocol. */
export function parseRelayFrame(text: string): RelayFrame | undefined {
  const split = splitTrailingData(text);
  if (split !== undefined) {
    const parsed = parseWholeFrame(split.head);
    if (parsed?.type === 'chunk' && parsed.frame.type === 'chunk' && parsed.frame.data === '') {
      return { type: 'chunk', frame: { ...parsed.frame, data: split.data } };
    }
  }
  return parseWholeFrame(text);
}

/** `"data":"`, the start of the member a `chunk` answer ends with. */
const dataMember = '"data":"';
/** Below this, a frame is parsed whole: the split pays off on a chunk's base64 only. */
const minSplitChars = 16_384;
/**
 * A `chunk` answer as the host writes it ends with its data (`…,"data":"<base64>"}`): in Node the
 * frame is parsed without it (JSON.parse of the 350 kB of a 256 KiB chunk was most of the
 * parse) and the data is checked as base64 on its own, its bytes kept for the decode that
 * follows (`fromBase64`). That is JSON.parse's answer: base64 digits hold no backslash, quote or
 * control character, so the frame with its data emptied is valid JSON exactly when the frame is,
 * with the same members but `data` (the last `data` wins in both). In a browser, where only a
 * slower check is at hand, and for any other frame, the frame is parsed whole.
 */
function splitTrailingData(text: string): { head: string; data: string } | undefined {
  const n = text.length;
  if (nodeBuffer === undefined || n < minSplitChars || !text.endsWith('"}')) return undefined;
  // the first `"data":"` in the frame: the data from there to the end is base64 (checked below,
  // and base64 has no quote) only when it is the last member
  const key = text.indexOf(dataMember);
  if (key < 1) return undefined;
  const before = text.charCodeAt(key - 1);
  if (before !== 0x2c && before !== 0x7b) return undefined;
  const open = key + dataMember.length - 1;
  const data = text.slice(open + 1, n - 2);
  if (!isStandardBase64(data)) return undefined;
  return { head: `${text.slice(0, open + 1)}"}`, data };
}

/** `parseRelayFrame` without the split: every frame parsed whole (what the split must agree with). */
export function parseWholeFrame(text: string): RelayFrame | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err: unknown) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  if ('type' in value) return sortControlFrame(value);
  const routed = routedSchema.safeParse(value);
  return routed.success ? { type: 'message', ...routed.data } : undefined;
}
