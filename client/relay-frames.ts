import type { z } from 'zod';
import type { NodeBytes } from '../protocol/base64.ts';
import { decodeBinaryFrame, relayFrameSchemas, wireDeviceId } from '../protocol/relay-frames.ts';
import { splitTrailingData } from '../protocol/trailing-data.ts';
import { type ChunkAnswer, type SortedFrame, sortControlFrame } from './store-frames.ts';

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

/**
 * Parses one text frame, a string or (from a `ws` socket) its UTF-8 bytes; undefined when it is
 * not JSON or not a frame of the protocol. A `chunk` answer as the host writes it, data last, is
 * parsed from its bytes without its data, which is decoded on its own (`splitTrailingData`):
 * the answer then has `data` empty and its bytes as `decoded`. Anything else is parsed whole.
 */
export function parseRelayFrame(text: string | NodeBytes): RelayFrame | undefined {
  if (typeof text === 'string') return parseWholeFrame(text);
  const split = splitTrailingData(text);
  if (split !== undefined) {
    const parsed = parseWholeFrame(split.head);
    if (parsed?.type === 'chunk' && parsed.frame.type === 'chunk' && parsed.frame.data === '') {
      return { type: 'chunk', frame: { ...parsed.frame, decoded: split.bytes } };
    }
  }
  return parseWholeFrame(text.toString('utf8'));
}

/**
 * Parses one binary frame: a `chunk` answer in the binary form (protocol/relay-frames.ts), with
 * `data` empty and its bytes as `decoded`; undefined for anything else.
 */
export function parseBinaryChunk(bytes: Uint8Array): ChunkAnswer | undefined {
  const binary = decodeBinaryFrame(bytes);
  if (binary === undefined || binary.header.type !== 'chunk') return undefined;
  const chunk = frames.chunk.safeParse({ ...binary.header, data: '' });
  if (!chunk.success) return undefined;
  return { ...chunk.data, decoded: binary.data as Uint8Array<ArrayBuffer> };
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
